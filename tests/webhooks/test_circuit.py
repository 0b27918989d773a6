"""The circuit breaker: an endpoint that keeps timing out stops taking delivery slots (a
silent host on 127.0.0.1, both databases)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from solarapi.events.types import DELIVERY_JOB_KIND
from solarapi.kit.timefmt import utcnow
from solarapi.models.jobs import Job
from solarapi.models.webhooks import WebhookDelivery, WebhookEndpoint
from solarapi.webhooks import delivery
from tests.jobs.test_runner import maker_of
from tests.support import Tenant, client_for
from tests.webhooks.test_delivery import create_endpoint, drain, emit


@contextmanager
def silent_host() -> Iterator[tuple[str, list[socket.socket]]]:
    """A host that accepts connections and never answers; yields its URL and the
    connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hooks", accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


async def test_an_endpoint_that_keeps_timing_out_stops_taking_slots(
    loopback_app: FastAPI, loopback_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real timeout is 10 s; the breaker counts timeouts, whatever their length.
    monkeypatch.setattr(delivery, "TIMEOUT_SECONDS", 0.3)
    with silent_host() as (url, accepted):
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, url)
        try:
            await _open_and_half_open(loopback_app, loopback_tenant, endpoint, accepted)
        finally:
            # Its deliveries still queued end at once (the endpoint is gone) instead of
            # waiting behind the open circuit: later tests drain with clocks days ahead,
            # where an open circuit's wait is always due again.
            async with client_for(loopback_app, loopback_tenant.live) as client:
                await client.delete(f"/api/v1/webhooks/{endpoint['id']}")


async def _open_and_half_open(
    loopback_app: FastAPI,
    loopback_tenant: Tenant,
    endpoint: dict[str, Any],
    accepted: list[socket.socket],
) -> None:
    for _ in range(6):
        await emit(loopback_app, loopback_tenant)
    await drain(loopback_app)
    # Three attempts timed out, then the circuit opened: the other three waited.
    assert len(accepted) == delivery.CIRCUIT_TIMEOUTS
    async with maker_of(loopback_app)() as session:
        tried = await session.scalars(
            select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint["id"])
        )
        assert len(tried.all()) == delivery.CIRCUIT_TIMEOUTS
        state = await session.get(WebhookEndpoint, endpoint["id"], populate_existing=True)
        assert state is not None
        assert state.consecutive_timeouts == delivery.CIRCUIT_TIMEOUTS
        assert state.circuit_open_until is not None
        open_until = state.circuit_open_until
        waiting = (
            await session.scalars(
                select(Job).where(
                    Job.kind == DELIVERY_JOB_KIND,
                    Job.status == "queued",
                    Job.account_id == loopback_tenant.account_id,
                )
            )
        ).all()
    first_attempts = [j for j in waiting if j.payload.get("attempt") == 1]
    assert len(first_attempts) == 3
    assert all(j.run_at >= open_until for j in first_attempts)

    # Half-open once the time is up: one delivery tries, times out, and the circuit
    # opens for twice as long.
    async with maker_of(loopback_app)() as session, session.begin():
        await session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint["id"])
            .values(circuit_open_until=utcnow() - timedelta(seconds=1))
        )
        await session.execute(
            update(Job)
            .where(Job.id.in_([j.id for j in first_attempts]))
            .values(run_at=utcnow() - timedelta(seconds=1))
        )
    await drain(loopback_app)
    assert len(accepted) == delivery.CIRCUIT_TIMEOUTS + 1
    async with maker_of(loopback_app)() as session:
        state = await session.get(WebhookEndpoint, endpoint["id"], populate_existing=True)
        assert state is not None
        assert state.circuit_open_until is not None
        assert state.consecutive_timeouts == delivery.CIRCUIT_TIMEOUTS + 1
        assert state.circuit_open_until - utcnow() > timedelta(seconds=90)
