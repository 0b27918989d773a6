"""Delivering events to webhook endpoints, per the Standard Webhooks spec.

Each attempt is one job of kind `webhook.deliver` on the shared job queue. The first attempt
is queued by `record_event` in the transaction of the change itself (so an event is delivered
if and only if its change committed); each failed attempt queues the next one on the
contract's schedule, with jitter, until ten attempts over about three days have failed.

At-least-once: a worker that dies after the receiver answered but before the attempt was
recorded sends the event again; the `webhook-id` header (the event id) lets the receiver
drop the duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import httpcore
import httpx
import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.events import repository as events_repository
from solarapi.events.service import EventView
from solarapi.events.types import DELIVERY_JOB_KIND, DELIVERY_JOB_MAX_ATTEMPTS
from solarapi.jobs.queue import enqueue, lease_held, settings_of
from solarapi.kit.ids import new_id
from solarapi.kit.timefmt import format_timestamp, utcnow
from solarapi.metrics import recorder_for
from solarapi.models.webhooks import Event, WebhookDelivery, WebhookEndpoint
from solarapi.webhooks import repository
from solarapi.webhooks.addresses import (
    ForbiddenDestination,
    check_addresses,
    resolve,
)
from solarapi.webhooks.service import WebhookConfig, signing_secrets
from solarapi.webhooks.signing import signature_header

log = logging.getLogger("solarapi.webhooks")

# Seconds to wait before attempt 1, 2, … 10 (attempt 1 at once; the contract's schedule).
RETRY_DELAYS: tuple[int, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
MAX_ATTEMPTS = len(RETRY_DELAYS)
# ±15 %: receivers that failed together (an outage) are not all retried in the same second.
JITTER = 0.15
TIMEOUT_SECONDS = 10.0
USER_AGENT = "SolarAPI-Webhooks/1.0"
# The circuit breaker: after this many attempts in a row without an answer in time, an
# endpoint's deliveries wait (without using an attempt) instead of each holding a slot for
# TIMEOUT_SECONDS; then one delivery tries it (half-open): an answer closes the circuit, a
# timeout opens it for twice as long, up to an hour.
CIRCUIT_TIMEOUTS = 3
CIRCUIT_OPEN_SECONDS = 60.0
CIRCUIT_OPEN_CAP_SECONDS = 3600.0
# How long the one half-open probe has before another delivery may try.
CIRCUIT_PROBE_SECONDS = TIMEOUT_SECONDS + 5


def circuit_open_for(timeouts: int) -> timedelta:
    doublings = max(0, timeouts - CIRCUIT_TIMEOUTS)
    seconds = min(CIRCUIT_OPEN_SECONDS * 2 ** min(doublings, 16), CIRCUIT_OPEN_CAP_SECONDS)
    return timedelta(seconds=seconds)


def retry_delay(next_attempt: int) -> timedelta:
    """How long to wait before `next_attempt` (2…10), with jitter."""
    base = RETRY_DELAYS[next_attempt - 1]
    return timedelta(seconds=base * random.uniform(1 - JITTER, 1 + JITTER))


# --- the connection guard ------------------------------------------------------------------


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves the host itself, refuses forbidden addresses, and connects to the address it
    checked. Checking inside the connect (not before the request) closes the window in which
    a rebinding DNS server could answer differently the second time. TLS still verifies the
    certificate against the host name, which httpcore passes to `start_tls` separately."""

    def __init__(self, allow_loopback: bool) -> None:
        self._allow_loopback = allow_loopback
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve(host, port)
        if addresses is None:
            raise httpcore.ConnectError(f"{host} does not resolve")
        check_addresses(host, addresses, allow_loopback=self._allow_loopback)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ForbiddenDestination("unix sockets are not webhook destinations")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs milliseconds; one context serves every delivery.
    return httpx.create_ssl_context()


class GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, allow_loopback: bool) -> None:
        # trust_env=False: a proxy from the environment would connect on our behalf and skip
        # the address check.
        super().__init__(verify=_ssl_context(), trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(),
            max_connections=10,
            network_backend=GuardedBackend(allow_loopback),
        )


# --- one attempt ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttemptResult:
    status_code: int | None
    latency_ms: int | None
    error: str | None
    timed_out: bool = False

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def gone(self) -> bool:
        return self.status_code == 410


@dataclass(frozen=True, slots=True)
class Delivery:
    url: str
    headers: dict[str, str]
    body: bytes


def build_delivery(
    endpoint: WebhookEndpoint, event: Event, config: WebhookConfig, now: datetime
) -> Delivery:
    body = orjson.dumps(EventView.of(event).render()).decode()
    signature = signature_header(
        signing_secrets(endpoint, config.server_secret, now), event.id, now, body
    )
    return Delivery(
        url=endpoint.url,
        headers={
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": event.id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        },
        body=body.encode(),
    )


async def send(delivery: Delivery, *, allow_loopback: bool) -> AttemptResult:
    started = time.perf_counter()

    def elapsed() -> int:
        return round((time.perf_counter() - started) * 1000)

    try:
        async with (
            asyncio.timeout(TIMEOUT_SECONDS),
            httpx.AsyncClient(
                transport=GuardedTransport(allow_loopback),
                timeout=TIMEOUT_SECONDS,
                follow_redirects=False,  # a redirect could point anywhere, unchecked
            ) as client,
            client.stream(
                "POST", delivery.url, content=delivery.body, headers=delivery.headers
            ) as response,
        ):
            # The status is all we need; the receiver's body is not read or kept.
            return AttemptResult(response.status_code, elapsed(), None)
    except ForbiddenDestination as exc:
        # Generic for the tenant (which internal address a name resolved to is ours to
        # know); the reason goes to the operator's log.
        log.info("webhook destination refused: %s", exc)
        return AttemptResult(None, None, "refused: not a public internet address")
    except (TimeoutError, httpx.TimeoutException):
        return AttemptResult(
            None, elapsed(), f"no response within {TIMEOUT_SECONDS:g} s", timed_out=True
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # Not the exception's text ("Connection refused", "Name or service not known", TLS
        # details): told apart, they let a tenant probe which ports answer.
        log.info("webhook delivery failed: %s", str(exc) or type(exc).__name__)
        return AttemptResult(None, elapsed(), "connection failed")


async def deliver(maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    """The `webhook.deliver` job: one attempt to deliver one event to one endpoint."""
    event_id = str(payload["event_id"])
    endpoint_id = str(payload["endpoint_id"])
    attempt = int(payload.get("attempt", 1))
    settings = settings_of(maker)
    config = WebhookConfig.from_settings(settings)

    async with maker() as session:
        endpoint = await repository.get_endpoint_by_id(session, endpoint_id)
        event = await events_repository.get(session, event_id)
        if endpoint is None or event is None:
            return  # deleted endpoint, or event past retention: nothing left to deliver
        if not endpoint.enabled or event.type not in endpoint.events:
            return  # disabled or unsubscribed since the event: stop retrying
        if await repository.attempt_recorded(session, endpoint_id, event_id, attempt):
            return  # this job ran before and recorded its outcome (a re-run after a crash)
        delivery = build_delivery(endpoint, event, config, utcnow())
        event_type = event.type
        account_id = endpoint.account_id

    wait_until = await _circuit_gate(maker, endpoint_id)
    if wait_until is not None:
        await _defer(maker, payload, account_id, wait_until)
        return

    attempted_at = utcnow()
    result = await send(delivery, allow_loopback=config.allow_loopback)

    outcome = "delivered" if result.succeeded else "gave_up"
    async with maker() as session, session.begin():
        if not await lease_held(session):
            return  # another worker took the job over and will record its own attempt
        next_at: datetime | None = None
        endpoint = await repository.get_endpoint_by_id(session, endpoint_id)
        if endpoint is not None and not result.succeeded:
            if result.gone:
                outcome = "gone"
                endpoint.enabled = False
                endpoint.disabled_reason = (
                    f"the receiver answered 410 Gone at {format_timestamp(attempted_at)}"
                )
                endpoint.updated_at = attempted_at
            elif attempt < MAX_ATTEMPTS and endpoint.enabled:
                outcome = "retrying"
                next_at = utcnow() + retry_delay(attempt + 1)
                await enqueue(
                    session,
                    DELIVERY_JOB_KIND,
                    {"event_id": event_id, "endpoint_id": endpoint_id, "attempt": attempt + 1},
                    run_at=next_at,
                    max_attempts=DELIVERY_JOB_MAX_ATTEMPTS,
                    account_id=account_id,
                )
        if endpoint is not None:
            await _count_for_circuit(session, endpoint_id, result)
            await repository.add(
                session,
                WebhookDelivery(
                    id=new_id("dlv"),
                    endpoint_id=endpoint_id,
                    event_id=event_id,
                    event_type=event_type,
                    attempt=attempt,
                    attempted_at=attempted_at,
                    status_code=result.status_code,
                    latency_ms=result.latency_ms,
                    succeeded=result.succeeded,
                    error=result.error[:500] if result.error else None,
                    next_attempt_at=next_at,
                ),
            )
    metrics = recorder_for(settings)
    if metrics is not None:
        metrics.webhook_delivery(outcome)
    if not result.succeeded:
        log.info(
            "webhook %s event %s attempt %d/%d failed: %s",
            endpoint_id,
            event_id,
            attempt,
            MAX_ATTEMPTS,
            result.error or f"HTTP {result.status_code}",
        )


# --- the circuit breaker ---------------------------------------------------------------------


async def _circuit_gate(
    maker: async_sessionmaker[AsyncSession], endpoint_id: str
) -> datetime | None:
    """None: this delivery may try the endpoint. Else until when it should wait: the circuit
    is open, or half-open with another delivery's probe out."""
    now = utcnow()
    async with maker() as session, session.begin():
        timeouts, open_until = await repository.circuit_state(session, endpoint_id)
        if timeouts < CIRCUIT_TIMEOUTS:
            return None
        if open_until is not None and open_until > now:
            return open_until
        probe_until = now + timedelta(seconds=CIRCUIT_PROBE_SECONDS)
        if await repository.take_probe(session, endpoint_id, open_until, probe_until):
            return None
        return probe_until


async def _defer(
    maker: async_sessionmaker[AsyncSession],
    payload: dict[str, Any],
    account_id: str,
    until: datetime,
) -> None:
    """The same attempt again once the circuit lets it, spread over a few seconds so the
    waiting deliveries do not all wake at once. Not an attempt: nothing is recorded."""
    run_at = until + timedelta(seconds=random.uniform(0, 5))
    async with maker() as session, session.begin():
        if not await lease_held(session):
            return
        await enqueue(
            session,
            DELIVERY_JOB_KIND,
            dict(payload),
            run_at=run_at,
            max_attempts=DELIVERY_JOB_MAX_ATTEMPTS,
            account_id=account_id,
        )


async def _count_for_circuit(
    session: AsyncSession, endpoint_id: str, result: AttemptResult
) -> None:
    if result.timed_out:
        timeouts = await repository.count_timeout(session, endpoint_id)
        if timeouts >= CIRCUIT_TIMEOUTS:
            until = utcnow() + circuit_open_for(timeouts)
            await repository.open_circuit(session, endpoint_id, until)
            log.warning(
                "webhook %s: %d attempts in a row without an answer; deliveries wait until %s",
                endpoint_id,
                timeouts,
                format_timestamp(until),
            )
    elif result.status_code is not None:
        await repository.close_circuit(session, endpoint_id)
