"""Idempotency-Key on POST: replay, mismatch, scope, concurrency (exactly one execution), and
what is not stored."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update
from starlette.background import BackgroundTask
from starlette.types import Message

from solarapi.config import Settings
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.plans import Plan
from solarapi.kit.timefmt import utcnow
from solarapi.models.webhooks import IdempotencyRecord, WebhookEndpoint
from tests.support import Tenant, TestClock, client_for, make_tenant, running_app

BODY = {"url": "https://1.1.1.1/hooks", "events": ["system.created"]}


def fresh_key() -> str:
    return f"idem-{uuid.uuid4()}"


async def endpoint_count(app: FastAPI, account_id: str) -> int:
    async with app.state.sessionmaker() as session:
        total = await session.scalar(
            select(func.count())
            .select_from(WebhookEndpoint)
            .where(WebhookEndpoint.account_id == account_id)
        )
    return int(total or 0)


async def test_repeat_replays_the_first_response(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    async with client_for(app, enterprise.live) as client:
        first = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
        again = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    # The signing secret is shown once: the replay is the first answer without it.
    assert again.json() == {k: v for k, v in first.json().items() if k != "secret"}
    assert again.headers["location"] == first.headers["location"]
    # The gateway's own headers are fresh on the replay.
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    assert await endpoint_count(app, enterprise.account_id) == 1


async def test_different_request_with_the_same_key_conflicts(
    app: FastAPI, enterprise: Tenant
) -> None:
    key = fresh_key()
    headers = {"Idempotency-Key": key}
    async with client_for(app, enterprise.live) as client:
        first = await client.post("/api/v1/webhooks", json=BODY, headers=headers)
        other_body = await client.post(
            "/api/v1/webhooks", json={**BODY, "description": "different"}, headers=headers
        )
        other_path = await client.post(
            f"/api/v1/webhooks/{first.json()['id']}/rotate-secret", headers=headers
        )
    assert first.status_code == 201
    for response in (other_body, other_path):
        assert response.status_code == 409
        assert response.json()["code"] == "conflict"
        assert f"Idempotency-Key '{key}' was already used" in response.json()["error"]
        assert "POST /api/v1/webhooks" in response.json()["error"]
    assert await endpoint_count(app, enterprise.account_id) == 1


async def test_keys_are_scoped_to_the_api_key(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    async with client_for(app, enterprise.live) as live:
        first = await live.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    async with client_for(app, enterprise.test) as test:
        second = await test.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    assert first.status_code == second.status_code == 201
    assert "idempotent-replayed" not in second.headers
    assert second.json()["id"] != first.json()["id"]
    assert second.json()["environment"] == "test"


@pytest.mark.parametrize("copies", [8])
async def test_concurrent_duplicates_run_once(
    app: FastAPI, enterprise: Tenant, copies: int
) -> None:
    key = fresh_key()
    async with client_for(app, enterprise.live) as client:
        responses = await asyncio.gather(
            *(
                client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
                for _ in range(copies)
            )
        )
    statuses = sorted(response.status_code for response in responses)
    originals = [
        r for r in responses if r.status_code == 201 and "idempotent-replayed" not in r.headers
    ]
    assert len(originals) == 1, statuses
    assert set(statuses) <= {201, 409}, statuses
    created_id = originals[0].json()["id"]
    for response in responses:
        if response.status_code == 201:
            assert response.json()["id"] == created_id
        else:
            assert "still being processed" in response.json()["error"]
    assert await endpoint_count(app, enterprise.account_id) == 1


async def test_client_errors_are_replayed_too(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    bad = {"url": "https://10.0.0.1/", "events": ["system.created"]}
    async with client_for(app, enterprise.live) as client:
        first = await client.post("/api/v1/webhooks", json=bad, headers={"Idempotency-Key": key})
        again = await client.post("/api/v1/webhooks", json=bad, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 400
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("x" * 256, "1 to 255 characters; got 256"),
        ("naïve", "printable ASCII"),
        ("tab\there", "printable ASCII"),
    ],
)
async def test_malformed_keys_are_refused(
    app: FastAPI, enterprise: Tenant, key: str, message: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/webhooks",
            json=BODY,
            headers=[("Idempotency-Key", key.encode("latin-1"))],  # type: ignore[arg-type]
        )
    assert response.status_code == 400
    assert response.json()["code"] == "validation"
    assert message in response.json()["error"]
    assert await endpoint_count(app, enterprise.account_id) == 0


async def test_longest_key_is_accepted(app: FastAPI, enterprise: Tenant) -> None:
    key = "k" * 200 + uuid.uuid4().hex[:55]
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key}
        )
    assert response.status_code == 201


async def test_key_expires_after_24_hours(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    async with client_for(app, enterprise.live) as client:
        first = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(IdempotencyRecord)
                .where(IdempotencyRecord.idempotency_key == key)
                .values(created_at=utcnow() - timedelta(hours=24, seconds=1))
            )
        later = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    assert later.status_code == 201
    assert "idempotent-replayed" not in later.headers
    assert later.json()["id"] != first.json()["id"]
    assert await endpoint_count(app, enterprise.account_id) == 2


async def test_abandoned_first_request_is_reported(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    async with client_for(app, enterprise.live) as client:
        await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
        # As if the process had died between taking the key and storing the response.
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(IdempotencyRecord)
                .where(IdempotencyRecord.idempotency_key == key)
                .values(
                    created_at=utcnow() - timedelta(minutes=11),
                    completed_at=None,
                    response_status=None,
                )
            )
        again = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    assert again.status_code == 409
    assert "never completed" in again.json()["error"]


async def test_requests_without_a_key_or_not_post_are_untouched(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        a = await client.post("/api/v1/webhooks", json=BODY)
        b = await client.post("/api/v1/webhooks", json=BODY)
        listed = await client.get("/api/v1/webhooks", headers={"Idempotency-Key": "x"})
        listed_again = await client.get("/api/v1/webhooks", headers={"Idempotency-Key": "x"})
    assert a.json()["id"] != b.json()["id"]
    assert "idempotent-replayed" not in listed_again.headers
    assert listed.json() == listed_again.json()


async def test_rejected_before_the_endpoint_is_not_remembered(
    app: FastAPI, pro: Tenant, enterprise: Tenant
) -> None:
    """403 (plan) comes from the gateway, before the key is looked at: nothing is stored, so
    the key stays usable."""
    key = fresh_key()
    async with client_for(app, pro.live) as client:
        refused = await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    assert refused.status_code == 403
    async with app.state.sessionmaker() as session:
        stored = await session.scalar(
            select(func.count())
            .select_from(IdempotencyRecord)
            .where(IdempotencyRecord.idempotency_key == key)
        )
    assert stored == 0


@pytest.fixture
async def flaky_app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    """The real app with one extra POST route that fails (500) on its first call only."""
    calls = {"n": 0}

    def routes(application: FastAPI) -> None:
        @application.post("/api/v1/flaky")
        async def flaky() -> OrjsonResponse:
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("first call fails")
            return OrjsonResponse({"call": calls["n"]}, status_code=201)

        @application.post("/api/v1/fails-after-answering")
        async def fails_after_answering() -> OrjsonResponse:
            calls["n"] += 1

            def explode() -> None:
                raise RuntimeError("a background task fails after the response was sent")

            return OrjsonResponse(
                {"call": calls["n"]}, status_code=201, background=BackgroundTask(explode)
            )

    async with running_app(settings, clock, routes=routes) as application:
        yield application


async def test_server_errors_are_not_stored(flaky_app: FastAPI) -> None:
    tenant = await make_tenant(flaky_app, Plan.ENTERPRISE)
    key = fresh_key()
    async with client_for(flaky_app, tenant.live) as client:
        failed = await client.post("/api/v1/flaky", json={}, headers={"Idempotency-Key": key})
        retried = await client.post("/api/v1/flaky", json={}, headers={"Idempotency-Key": key})
        replayed = await client.post("/api/v1/flaky", json={}, headers={"Idempotency-Key": key})
    assert failed.status_code == 500
    assert failed.json()["code"] == "server_error"
    assert retried.status_code == 201
    assert "idempotent-replayed" not in retried.headers
    assert retried.json() == {"call": 2}
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == {"call": 2}


async def test_oversized_chunked_body_is_refused_without_taking_the_key(
    app: FastAPI, enterprise: Tenant
) -> None:
    key = fresh_key()
    limit = app.state.settings.max_body_bytes

    async def chunks() -> AsyncIterator[bytes]:
        sent = 0
        while sent <= limit:
            yield b" " * 65536
            sent += 65536

    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/webhooks",
            content=chunks(),
            headers={"Idempotency-Key": key, "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    async with app.state.sessionmaker() as session:
        stored = await session.scalar(
            select(func.count())
            .select_from(IdempotencyRecord)
            .where(IdempotencyRecord.idempotency_key == key)
        )
    assert stored == 0


async def test_a_failure_after_a_complete_answer_still_replays(flaky_app: FastAPI) -> None:
    """The endpoint committed and answered; something after it failed. A retry must get the
    answer, not run the endpoint again."""
    tenant = await make_tenant(flaky_app, Plan.ENTERPRISE)
    key = fresh_key()
    async with client_for(flaky_app, tenant.live) as client:
        # The gateway logs the late error; the client already has its answer.
        first = await client.post(
            "/api/v1/fails-after-answering", json={}, headers={"Idempotency-Key": key}
        )
        assert first.status_code == 201
        again = await client.post(
            "/api/v1/fails-after-answering", json={}, headers={"Idempotency-Key": key}
        )
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == {"call": 1}


async def test_a_long_query_string_is_remembered_too(app: FastAPI, enterprise: Tenant) -> None:
    key = fresh_key()
    path = "/api/v1/webhooks?note=" + "x" * 3000  # unknown query parameters are ignored
    async with client_for(app, enterprise.live) as client:
        first = await client.post(path, json=BODY, headers={"Idempotency-Key": key})
        again = await client.post(path, json=BODY, headers={"Idempotency-Key": key})
        other = await client.post(path + "y", json=BODY, headers={"Idempotency-Key": key})
    assert first.status_code == 201, first.text
    assert again.headers["idempotent-replayed"] == "true"
    assert other.status_code == 409


async def test_the_hourly_clean_up_deletes_expired_keys_only(
    app: FastAPI, enterprise: Tenant
) -> None:
    from solarapi.jobs.queue import PERIODIC_TASKS
    from solarapi.webhooks.jobs import purge_retained

    assert PERIODIC_TASKS["webhooks.retention"] == (3600, purge_retained)
    old, fresh = fresh_key(), fresh_key()
    async with client_for(app, enterprise.live) as client:
        for key in (old, fresh):
            await client.post("/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": key})
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.idempotency_key == old)
            .values(created_at=utcnow() - timedelta(hours=25))
        )
    await purge_retained(app.state.sessionmaker, utcnow())
    async with app.state.sessionmaker() as session:
        left = set(
            await session.scalars(
                select(IdempotencyRecord.idempotency_key).where(
                    IdempotencyRecord.idempotency_key.in_([old, fresh])
                )
            )
        )
    assert left == {fresh}


async def _stored_response(app: FastAPI, key: str) -> IdempotencyRecord:
    async with app.state.sessionmaker() as session:
        record = await session.scalar(
            select(IdempotencyRecord).where(IdempotencyRecord.idempotency_key == key)
        )
    assert record is not None
    return record


async def test_a_webhook_secret_is_never_stored_nor_replayed(
    app: FastAPI, enterprise: Tenant
) -> None:
    create_key, rotate_key = fresh_key(), fresh_key()
    async with client_for(app, enterprise.live) as client:
        created = await client.post(
            "/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": create_key}
        )
        path = f"/api/v1/webhooks/{created.json()['id']}/rotate-secret"
        rotated = await client.post(path, headers={"Idempotency-Key": rotate_key})
        created_again = await client.post(
            "/api/v1/webhooks", json=BODY, headers={"Idempotency-Key": create_key}
        )
        rotated_again = await client.post(path, headers={"Idempotency-Key": rotate_key})
    secrets = [created.json()["secret"], rotated.json()["secret"]]
    assert all(secret.startswith("whsec_") for secret in secrets)
    for key in (create_key, rotate_key):
        record = await _stored_response(app, key)
        stored = (record.response_body or b"") + repr(record.response_headers).encode()
        assert b"whsec_" not in stored
        assert all(secret.encode() not in stored for secret in secrets)
    for first, again in ((created, created_again), (rotated, rotated_again)):
        assert again.status_code == first.status_code
        assert again.headers["idempotent-replayed"] == "true"
        assert "whsec_" not in again.text
        assert again.json() == {k: v for k, v in first.json().items() if k != "secret"}
        assert again.headers["content-length"] == str(len(again.content))


async def test_an_ingest_token_is_never_stored_nor_replayed(
    app: FastAPI, enterprise: Tenant
) -> None:
    """An ingest token is shown once, like a webhook secret: a replayed creation answered
    with the token again, read back from the idempotency record that held it in plain text
    for 24 hours (the official client sends an Idempotency-Key with every POST)."""
    key = fresh_key()
    system = {
        "name": "Dak",
        "capacity_kwp": 5.0,
        "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
    }
    async with client_for(app, enterprise.live) as client:
        system_id = (await client.post("/api/v1/systems", json=system)).json()["id"]
        path = f"/api/v1/systems/{system_id}/ingest-tokens"
        created = await client.post(path, json={"name": "logger"}, headers={"Idempotency-Key": key})
        again = await client.post(path, json={"name": "logger"}, headers={"Idempotency-Key": key})
    token = created.json()["token"]
    assert token.startswith("ik_")
    record = await _stored_response(app, key)
    stored = (record.response_body or b"") + repr(record.response_headers).encode()
    assert token.encode() not in stored
    assert again.status_code == created.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert token not in again.text
    assert again.json() == {k: v for k, v in created.json().items() if k != "token"}


async def test_the_answer_is_stored_before_the_client_receives_it(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A retry sent the moment the first answer's last byte arrives is a replay. The app is
    driven through raw ASGI so the retry runs inside that moment (an HTTP client would only
    return once the first request's handling had finished)."""
    key = fresh_key()
    body = orjson.dumps(BODY)
    sent: list[Message] = []
    retries: list[httpx.Response] = []
    client = client_for(app, enterprise.live)

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            retries.append(
                await client.post("/api/v1/webhooks", content=body, headers=_json_and(key))
            )

    headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {enterprise.live}".encode()),
        (b"content-length", str(len(body)).encode()),
        *((name.lower().encode(), value.encode()) for name, value in _json_and(key).items()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/webhooks",
        "raw_path": b"/api/v1/webhooks",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("10.9.8.7", 50000),
        "server": ("testserver", 80),
    }
    async with client:
        await app(scope, receive, send)
    assert sent[0]["status"] == 201
    first = orjson.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    (retry,) = retries
    assert retry.status_code == 201, retry.text
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == first["id"]
    assert await endpoint_count(app, enterprise.account_id) == 1


def _json_and(key: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Idempotency-Key": key}


async def test_a_path_outside_latin_1_is_remembered(app: FastAPI, enterprise: Tenant) -> None:
    """Found by schemathesis: a non-Latin-1 path id was a 500 (UnicodeEncodeError)."""
    key = fresh_key()
    path = "/api/v1/webhooks/we_€✓/rotate-secret"
    async with client_for(app, enterprise.live) as client:
        first = await client.post(path, headers={"Idempotency-Key": key})
        again = await client.post(path, headers={"Idempotency-Key": key})
        other = await client.post(path.replace("€", "e"), headers={"Idempotency-Key": key})
    assert first.status_code == 404, first.text
    assert first.json()["code"] == "not_found"
    assert again.status_code == 404
    assert again.headers["idempotent-replayed"] == "true"
    assert other.status_code == 409  # the same key for another path
