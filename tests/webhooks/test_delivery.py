"""Deliveries to a real HTTP receiver on 127.0.0.1, driven through the job runner's step
function (`run_pending`) with its clock moved forward instead of sleeping through retries."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select, update
from standardwebhooks import Webhook, WebhookVerificationError

from solarapi.events.service import record_event
from solarapi.events.types import DELIVERY_JOB_KIND as JOB_KIND
from solarapi.jobs.runner import run_pending
from solarapi.kit.timefmt import parse_timestamp, utcnow
from solarapi.models.jobs import Job
from solarapi.models.webhooks import WebhookEndpoint
from solarapi.webhooks.delivery import MAX_ATTEMPTS, RETRY_DELAYS, deliver
from tests.support import Tenant, client_for
from tests.webhooks.receiver import running_receiver


async def create_endpoint(
    app: FastAPI, key: str, url: str, events: list[str] | None = None
) -> dict[str, Any]:
    async with client_for(app, key) as client:
        response = await client.post(
            "/api/v1/webhooks", json={"url": url, "events": events or ["system.created"]}
        )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def emit(
    app: FastAPI, tenant: Tenant, event_type: str = "system.created", environment: str = "live"
) -> str:
    async with app.state.sessionmaker() as session, session.begin():
        return await record_event(
            session,
            account_id=tenant.account_id,
            environment=environment,
            event_type=event_type,
            data={"id": "sys_TEST", "name": "Rooftop Haarlem", "capacity_kwp": 8.4},
        )


# More delivery jobs than any test makes: a drain that reaches it is looping (a job that
# keeps making a new one due by the drain's clock), and fails instead of hanging the suite.
_DRAIN_BOUND = 1_000


async def drain(app: FastAPI, ahead: timedelta = timedelta(0)) -> int:
    """Run every delivery job due by now + `ahead`."""
    moment = utcnow() + ahead
    ran = await run_pending(
        app.state.sessionmaker,
        "test-worker",
        kinds={JOB_KIND},
        clock=lambda: moment,
        max_jobs=_DRAIN_BOUND,
    )
    assert ran < _DRAIN_BOUND, "delivery jobs keep becoming due: a job re-enqueues itself"
    return ran


async def deliveries(app: FastAPI, key: str, endpoint_id: str) -> list[dict[str, Any]]:
    async with client_for(app, key) as client:
        response = await client.get(f"/api/v1/webhooks/{endpoint_id}/deliveries")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]
    return items


async def test_signature_verifies_with_the_reference_library(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        event_id = await emit(loopback_app, loopback_tenant)
        assert await drain(loopback_app) >= 1

    assert len(receiver.received) == 1
    request = receiver.received[0]
    assert request.path == "/hooks"
    assert request.headers["webhook-id"] == event_id
    assert request.headers["content-type"] == "application/json"
    payload = Webhook(endpoint["secret"]).verify(request.body, request.headers)
    async with client_for(loopback_app, loopback_tenant.live) as client:
        listed = (await client.get("/api/v1/events")).json()["data"]
    # The body is the event object exactly as GET /events shows it.
    assert payload == next(item for item in listed if item["id"] == event_id)
    assert payload["data"]["name"] == "Rooftop Haarlem"

    # A tampered body, or another secret, fails verification.
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint["secret"]).verify(request.body + b" ", request.headers)
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(request.body, request.headers)

    attempts = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
    assert len(attempts) == 1
    assert attempts[0]["status_code"] == 200
    assert attempts[0]["success"] is True
    assert attempts[0]["attempt"] == 1
    assert attempts[0]["event_id"] == event_id
    assert attempts[0]["latency_ms"] is not None
    assert attempts[0]["next_attempt_at"] is None


async def test_failing_twice_then_succeeding_delivers_three_times_same_id(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver(script=[500, 503]) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        event_id = await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
        assert len(receiver.received) == 1
        # The retry is not due yet at the real time: 5 s (±15 %) later.
        await drain(loopback_app)
        assert len(receiver.received) == 1
        await drain(loopback_app, timedelta(seconds=10))
        assert len(receiver.received) == 2
        # The third attempt waits ~5 minutes.
        await drain(loopback_app, timedelta(seconds=60))
        assert len(receiver.received) == 2
        await drain(loopback_app, timedelta(minutes=10))
        assert len(receiver.received) == 3
        # Success ends the schedule.
        await drain(loopback_app, timedelta(days=4))

    assert len(receiver.received) == 3
    assert {request.headers["webhook-id"] for request in receiver.received} == {event_id}
    for request in receiver.received:
        assert Webhook(endpoint["secret"]).verify(request.body, request.headers)["id"] == event_id
    attempts = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
    # Newest first.
    assert [(a["attempt"], a["status_code"], a["success"]) for a in attempts] == [
        (3, 200, True),
        (2, 503, False),
        (1, 500, False),
    ]
    assert attempts[1]["next_attempt_at"] is not None
    assert attempts[0]["next_attempt_at"] is None


async def test_retry_schedule_stops_after_ten_attempts(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver(default_status=500) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        await emit(loopback_app, loopback_tenant)
        # The whole schedule (≈ 3.1 days with jitter) fits in 4 days.
        await drain(loopback_app, timedelta(days=4))
    assert sum(RETRY_DELAYS) / 86400 == pytest.approx(3.15, abs=0.01)
    assert len(receiver.received) == MAX_ATTEMPTS == 10
    attempts = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
    assert sorted(a["attempt"] for a in attempts) == list(range(1, 11))
    assert all(a["status_code"] == 500 for a in attempts)
    last = next(a for a in attempts if a["attempt"] == 10)
    assert last["next_attempt_at"] is None
    # Each retry is scheduled the contract's delay after the failure, within the ±15 % jitter.
    by_attempt = {a["attempt"]: a for a in attempts}
    contract = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]
    for attempt, expected in zip(range(1, 10), contract, strict=True):
        failed_at = parse_timestamp(by_attempt[attempt]["attempted_at"])
        next_at = parse_timestamp(by_attempt[attempt]["next_attempt_at"])
        # Whole-second timestamps: allow 2 s of rounding on the short first delay.
        assert expected * 0.85 - 2 <= (next_at - failed_at).total_seconds() <= expected * 1.15 + 2


async def test_a_disabled_endpoint_shows_no_retry_to_come(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    """A failed attempt's retry is queued; while the endpoint is disabled the retry does not
    run, and the deliveries list no longer says one is due; re-enabled in time, it is and
    runs."""
    with running_receiver(default_status=500) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
        (failed,) = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
        assert failed["next_attempt_at"] is not None
        path = f"/api/v1/webhooks/{endpoint['id']}"
        async with client_for(loopback_app, loopback_tenant.live) as client:
            off = await client.patch(path, json={"status": "disabled"})
            assert off.status_code == 200, off.text
        (shown,) = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
        assert shown["next_attempt_at"] is None
        # Re-enabled before the retry is due: it is due again, and runs.
        async with client_for(loopback_app, loopback_tenant.live) as client:
            on = await client.patch(path, json={"status": "enabled"})
            assert on.status_code == 200, on.text
        (again,) = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
        assert again["next_attempt_at"] == failed["next_attempt_at"]
        await drain(loopback_app, timedelta(minutes=1))
        assert len(receiver.received) == 2


async def test_gone_disables_the_endpoint(loopback_app: FastAPI, loopback_tenant: Tenant) -> None:
    with running_receiver(script=[410]) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app, timedelta(days=4))
        assert len(receiver.received) == 1
        async with client_for(loopback_app, loopback_tenant.live) as client:
            state = (await client.get(f"/api/v1/webhooks/{endpoint['id']}")).json()
        assert state["status"] == "disabled"
        assert "410" in state["disabled_reason"]
        # Later events are not sent to a disabled endpoint.
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app, timedelta(days=4))
        assert len(receiver.received) == 1

        # Re-enabling resumes deliveries.
        async with client_for(loopback_app, loopback_tenant.live) as client:
            enabled = await client.patch(
                f"/api/v1/webhooks/{endpoint['id']}", json={"status": "enabled"}
            )
        assert enabled.json()["status"] == "enabled"
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
        assert len(receiver.received) == 2


async def test_rotation_sends_two_signatures_for_24_hours(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        async with client_for(loopback_app, loopback_tenant.live) as client:
            rotated = (await client.post(f"/api/v1/webhooks/{endpoint['id']}/rotate-secret")).json()
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
        assert len(receiver.received) == 1
        both = receiver.received[0]
        signatures = both.headers["webhook-signature"].split(" ")
        assert len(signatures) == 2
        assert all(signature.startswith("v1,") for signature in signatures)
        # Receivers with either secret accept the delivery.
        for secret in (endpoint["secret"], rotated["secret"]):
            assert Webhook(secret).verify(both.body, both.headers)["type"] == "system.created"

        # After the overlap only the new secret signs.
        async with loopback_app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == endpoint["id"])
                .values(previous_salt_expires_at=utcnow() - timedelta(seconds=1))
            )
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
    single = receiver.received[1]
    assert len(single.headers["webhook-signature"].split(" ")) == 1
    assert Webhook(rotated["secret"]).verify(single.body, single.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint["secret"]).verify(single.body, single.headers)


async def test_delivery_refuses_forbidden_address_at_send_time(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A name that resolved to a public address when the endpoint was saved may resolve to a
    forbidden one later (DNS rebinding): the URL is stored as if it had passed, and the
    delivery made by an app that does not allow loopback must not reach the receiver."""
    with running_receiver() as receiver:
        endpoint = await create_endpoint(app, enterprise.live, "https://receiver.example.invalid/h")
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == endpoint["id"])
                .values(url=receiver.url.replace("127.0.0.1", "localhost"))
            )
        await emit(app, enterprise)
        await drain(app)
    assert receiver.received == []
    attempts = await deliveries(app, enterprise.live, endpoint["id"])
    assert len(attempts) == 1
    assert attempts[0]["status_code"] is None
    assert attempts[0]["success"] is False
    # Generic for the tenant: which address a name resolved to is not theirs to learn.
    assert attempts[0]["error"] == "refused: not a public internet address"
    # It is retried on schedule (the name may resolve properly again).
    assert attempts[0]["next_attempt_at"] is not None


async def test_unreachable_receiver_is_a_failed_attempt(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver:
        url = receiver.url
    # The receiver has stopped: the port refuses connections.
    endpoint = await create_endpoint(loopback_app, loopback_tenant.live, url)
    await emit(loopback_app, loopback_tenant)
    await drain(loopback_app)
    attempts = await deliveries(loopback_app, loopback_tenant.live, endpoint["id"])
    assert len(attempts) == 1
    assert attempts[0]["status_code"] is None
    assert attempts[0]["error"].startswith("connection failed")


async def test_only_subscribed_events_of_the_same_environment_are_sent(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver() as receiver:
        await create_endpoint(
            loopback_app, loopback_tenant.live, receiver.url, ["declaration.approved"]
        )
        await emit(loopback_app, loopback_tenant, "system.created")
        await emit(loopback_app, loopback_tenant, "declaration.approved", environment="test")
        wanted = await emit(loopback_app, loopback_tenant, "declaration.approved")
        await drain(loopback_app)
    assert [request.headers["webhook-id"] for request in receiver.received] == [wanted]


async def test_deleted_endpoint_stops_pending_retries(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    with running_receiver(default_status=500) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        await emit(loopback_app, loopback_tenant)
        await drain(loopback_app)
        assert len(receiver.received) == 1
        async with client_for(loopback_app, loopback_tenant.live) as client:
            assert (await client.delete(f"/api/v1/webhooks/{endpoint['id']}")).status_code == 204
        await drain(loopback_app, timedelta(days=4))
    assert len(receiver.received) == 1
    async with loopback_app.state.sessionmaker() as session:
        jobs = (
            await session.scalars(select(Job).where(Job.kind == JOB_KIND, Job.status == "queued"))
        ).all()
    assert not [job for job in jobs if job.payload.get("endpoint_id") == endpoint["id"]]


async def test_a_rerun_job_does_not_deliver_a_recorded_attempt_again(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    """The runner may run a job again (at-least-once); once its attempt is recorded, a re-run
    neither sends again nor schedules a second retry."""
    with running_receiver(default_status=500) as receiver:
        endpoint = await create_endpoint(loopback_app, loopback_tenant.live, receiver.url)
        event_id = await emit(loopback_app, loopback_tenant)
        payload = {"event_id": event_id, "endpoint_id": endpoint["id"], "attempt": 1}
        await deliver(loopback_app.state.sessionmaker, payload)
        await deliver(loopback_app.state.sessionmaker, payload)
        assert len(receiver.received) == 1
        async with loopback_app.state.sessionmaker() as session:
            retries = [
                job
                for job in (await session.scalars(select(Job).where(Job.kind == JOB_KIND))).all()
                if job.payload.get("endpoint_id") == endpoint["id"] and job.payload["attempt"] == 2
            ]
        assert len(retries) == 1
        # Clean up this test's first-attempt job, which the direct calls stood in for.
        async with client_for(loopback_app, loopback_tenant.live) as client:
            await client.delete(f"/api/v1/webhooks/{endpoint['id']}")
        await drain(loopback_app)
