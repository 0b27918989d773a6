"""Deliveries made by real processes: the in-process runner of `solarapi serve`, and a
`solarapi worker --once` that knows only the environment (its signatures must still verify
with the secret the API returned)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI
from standardwebhooks import Webhook

from solarapi.config import Settings
from solarapi.events.service import record_event
from tests.support import Tenant, client_for, run_cli, served, settings_env
from tests.webhooks.receiver import Receiver, running_receiver

pytestmark = [pytest.mark.slow]


def env_for(settings: Settings, runner: str) -> dict[str, str]:
    return settings_env(
        settings,
        SOLARAPI_JOB_RUNNER=runner,
        SOLARAPI_WEBHOOKS_ALLOW_LOOPBACK="true",
        SOLARAPI_REDIS_URL="",
        SOLARAPI_LOG_LEVEL="WARNING",
    )


async def wait_for_delivery(receiver: Receiver, event_id: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(r.headers.get("webhook-id") == event_id for r in receiver.received):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"event {event_id} was not delivered within {seconds} s")


async def test_serve_delivers_with_its_inline_runner(
    settings: Settings, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver, served(env_for(settings, "inline")) as server:
        async with httpx.AsyncClient(
            base_url=server.base,
            headers={"Authorization": f"Bearer {loopback_tenant.live}"},
            timeout=30,
        ) as client:
            hook = await client.post(
                "/api/v1/webhooks", json={"url": receiver.url, "events": ["system.created"]}
            )
            assert hook.status_code == 201, hook.text
            created = await client.post(
                "/api/v1/systems",
                json={
                    "name": "Served roof",
                    "capacity_kwp": 5.0,
                    "location": {
                        "latitude": 52.0,
                        "longitude": 5.0,
                        "timezone": "Europe/Amsterdam",
                    },
                },
            )
            assert created.status_code == 201, created.text
            events = (await client.get("/api/v1/events")).json()["data"]
            event = next(e for e in events if e["data"].get("id") == created.json()["id"])
            await wait_for_delivery(receiver, event["id"])
            request = next(r for r in receiver.received if r.headers["webhook-id"] == event["id"])
            assert Webhook(hook.json()["secret"]).verify(request.body, request.headers) == event
            # The runner records the attempt after the receiver has answered: on a busy
            # machine the receiver can be read before that commit.
            deliveries = f"/api/v1/webhooks/{hook.json()['id']}/deliveries"
            deadline = time.monotonic() + 60
            attempts = (await client.get(deliveries)).json()["data"]
            while not attempts and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                attempts = (await client.get(deliveries)).json()["data"]
            assert [(a["event_id"], a["status_code"]) for a in attempts] == [(event["id"], 200)]


async def test_worker_process_delivers_with_the_same_secret(
    settings: Settings, loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver:
        async with client_for(loopback_app, loopback_tenant.live) as client:
            hook = await client.post(
                "/api/v1/webhooks", json={"url": receiver.url, "events": ["report.completed"]}
            )
        async with loopback_app.state.sessionmaker() as session, session.begin():
            event_id = await record_event(
                session,
                account_id=loopback_tenant.account_id,
                environment="live",
                event_type="report.completed",
                data={"id": "rpt_X", "status": "completed"},
            )
        result = await asyncio.to_thread(
            run_cli, env_for(settings, "external"), "worker", "--once", process=True
        )
        assert "ran" in result.stderr
        await wait_for_delivery(receiver, event_id, seconds=5)
    request = next(r for r in receiver.received if r.headers["webhook-id"] == event_id)
    assert Webhook(hook.json()["secret"]).verify(request.body, request.headers)["id"] == event_id
