"""Ingest tokens: managed by Enterprise keys (and in the dashboard by every plan), shown
once, stored as an HMAC, good for exactly one upload endpoint of one system, with a window
of their own; on both databases."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
from fastapi import FastAPI
from sqlalchemy import select

from solarapi.auth.keys import checksum
from solarapi.ingest.tokens import TOKEN_PATTERN, well_formed
from solarapi.models.ingest import IngestToken
from solarapi.models.webhooks import IdempotencyRecord
from tests.dashboard.helpers import browser_for, csrf_of, log_in, nonce_of, text_of
from tests.support import Tenant, TestClock, client_for

SYSTEM = {
    "name": "Dak Haarlem",
    "capacity_kwp": 6.0,
    "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
}


def _readings(count: int, days_back: int = 2) -> dict[str, Any]:
    start = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    start -= timedelta(days=days_back)
    return {
        "readings": [
            {
                "timestamp": (start + timedelta(minutes=15 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "energy_wh": 100.0 + i,
            }
            for i in range(count)
        ]
    }


async def _system(api: httpx.AsyncClient) -> str:
    created = await api.post("/api/v1/systems", json=SYSTEM)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _token(api: httpx.AsyncClient, system_id: str, name: str = "roof logger") -> Any:
    created = await api.post(f"/api/v1/systems/{system_id}/ingest-tokens", json={"name": name})
    assert created.status_code == 201, created.text
    return created.json()


def test_the_token_format_carries_the_key_checksum() -> None:
    token = "ik_" + "a" * 32 + checksum("a" * 32)
    assert well_formed(token)
    assert not well_formed(token[:-1] + ("0" if token[-1] != "0" else "1"))
    assert not well_formed("pk_live_" + "a" * 32 + checksum("a" * 32))


async def test_create_shows_the_token_once_and_stores_its_hmac(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        created = await _token(api, system_id)
        assert set(created) == {"id", "name", "token", "display", "created_at", "last_used_at"}
        assert created["id"].startswith("itk_")
        assert TOKEN_PATTERN.match(created["token"])
        assert created["display"] == f"{created['token'][:7]}…{created['token'][-4:]}"
        assert created["last_used_at"] is None
        listed = await api.get(f"/api/v1/systems/{system_id}/ingest-tokens")
        assert listed.status_code == 200
        assert listed.json() == {"data": [{k: v for k, v in created.items() if k != "token"}]}
    async with app.state.sessionmaker() as session:
        stored = await session.scalar(select(IngestToken).where(IngestToken.id == created["id"]))
    assert stored is not None
    secret = app.state.settings.effective_secret_key
    expected = hmac.new(secret, created["token"].encode(), hashlib.sha256).hexdigest()
    assert stored.token_hash == expected
    assert created["token"] not in repr(stored.__dict__)


async def test_the_document_refuses_the_blank_names_the_server_refuses(
    app: FastAPI, enterprise: Tenant
) -> None:
    """Found by fuzzing (schema-valid request rejected): `{"name": "\\u001e"}` was valid by
    the OpenAPI document (1–100 characters) and a 400 "name: must not be blank", as is every
    name of only characters Python strips. The document now says so with a pattern, for
    token and system names; a name with anything else in it is accepted by both."""
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        doc = (await api.get("/api/v1/openapi.json")).json()["components"]["schemas"]
        patterns = {
            ("POST", f"/api/v1/systems/{system_id}/ingest-tokens"): doc["TokenCreate"][
                "properties"
            ]["name"]["pattern"],
            ("PATCH", f"/api/v1/systems/{system_id}"): doc["SystemPatch"]["properties"]["name"][
                "pattern"
            ],
            ("POST", "/api/v1/systems"): doc["SystemCreate"]["properties"]["name"]["pattern"],
        }
        blanks = [chr(c) for c in range(0x3001) if chr(c).isspace()]
        for (method, path), pattern in patterns.items():
            for name in ["\u001e", " \u2003\t", *blanks]:
                assert re.search(pattern, name) is None, (path, name)
                body = {**SYSTEM, "name": name} if path.endswith("/systems") else {"name": name}
                response = await api.request(method, path, json=body)
                assert response.status_code == 400, (path, name, response.text)
                assert response.json()["error"] == "name: must not be blank"
            assert re.search(pattern, "\u001e roof \u00a0logger") is not None


async def test_managing_tokens_needs_enterprise_and_the_system(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        assert (
            await api.post(f"/api/v1/systems/{system_id}/ingest-tokens", json={"name": " "})
        ).status_code == 400
        assert (
            await api.post(f"/api/v1/systems/{system_id}/ingest-tokens", json={"nom": "x"})
        ).status_code == 400
    async with client_for(app, enterprise.test) as sandbox:
        other_env = await sandbox.get(f"/api/v1/systems/{system_id}/ingest-tokens")
        assert other_env.status_code == 404
        # A simulated system takes no upload, so no token (one could never be used).
        simulated = (await sandbox.get("/api/v1/systems")).json()["data"][0]
        assert simulated["data_source"] == "simulated"
        refused_simulated = await sandbox.post(
            f"/api/v1/systems/{simulated['id']}/ingest-tokens", json={"name": "logger"}
        )
        assert refused_simulated.status_code == 409
        assert refused_simulated.json()["code"] == "conflict"
        assert "is simulated" in refused_simulated.json()["error"]
        listed = await sandbox.get(f"/api/v1/systems/{simulated['id']}/ingest-tokens")
        assert listed.json() == {"data": []}
    async with client_for(app, pro.live) as reader:
        refused = await reader.get(f"/api/v1/systems/{system_id}/ingest-tokens")
        assert refused.status_code == 403
        assert refused.json()["code"] == "forbidden"


async def test_a_token_uploads_its_systems_readings_and_nothing_else(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        other_id = await _system(api)
        token = (await _token(api, system_id))["token"]
    async with client_for(app, token) as logger:
        uploaded = await logger.post("/api/v1/ingest/readings", json=_readings(4))
        assert uploaded.status_code == 200, uploaded.text
        assert uploaded.json() == {"received": 4, "inserted": 4, "updated": 0}
        assert uploaded.headers["x-ratelimit-limit-minute"] == "60"
        # Anything else with the token is a 401, even reads of its own system.
        for method, path in (
            ("GET", f"/api/v1/systems/{system_id}"),
            ("GET", f"/api/v1/systems/{system_id}/readings"),
            ("POST", f"/api/v1/systems/{other_id}/readings"),
            ("POST", f"/api/v1/systems/{system_id}/readings"),
            ("GET", "/api/v1/account"),
        ):
            answer = await logger.request(method, path, json=_readings(1))
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["code"] == "unauthorized"
            assert "ingest tokens" in answer.json()["error"]
    async with client_for(app, enterprise.live) as api:
        stored = await api.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": _readings(1)["readings"][0]["timestamp"], "interval": "1d"},
        )
        assert stored.json()["meta"]["totals"]["energy_wh"] == 100 + 101 + 102 + 103
        other = await api.get(f"/api/v1/systems/{other_id}")
        assert other.json()["last_reading_at"] is None
        events = await api.get("/api/v1/events", params={"type": "readings.uploaded"})
        assert events.json()["data"][0]["data"]["system_id"] == system_id
        listed = await api.get(f"/api/v1/systems/{system_id}/ingest-tokens")
        assert listed.json()["data"][0]["last_used_at"] is not None


async def test_an_invalid_batch_stores_nothing_with_the_apis_message(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        token = (await _token(api, system_id))["token"]
    body = _readings(3)
    body["readings"][2]["energy_wh"] = -1
    async with client_for(app, token) as logger:
        refused = await logger.post("/api/v1/ingest/readings", json=body)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "readings[2].energy_wh: must be ≥ 0; got -1.0",
        "code": "validation",
    }
    async with client_for(app, enterprise.live) as api:
        assert (await api.get(f"/api/v1/systems/{system_id}")).json()["first_reading_at"] is None


async def test_a_key_given_twice_in_a_large_body_stores_nothing(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The gateway checks repeated keys in bodies up to 256 KiB; above it only the API's
    upload checked them, so a logger's large batch with `"energy_wh": 900, "energy_wh": 5`
    was stored with 5 (orjson keeps the last) where the API refuses it."""
    body = _readings(5000, days_back=60)
    first = body["readings"][0]
    items = [orjson.dumps({**item, "energy_wh": 10.0}).decode() for item in body["readings"]]
    items[0] = f'{{"timestamp": "{first["timestamp"]}", "energy_wh": 900, "energy_wh": 5}}'
    raw = ('{"readings": [' + ",".join(items) + "]}").encode()
    assert len(raw) > 256 * 1024
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        token = (await _token(api, system_id))["token"]
        async with client_for(app, token) as logger:
            refused = await logger.post(
                "/api/v1/ingest/readings",
                content=raw,
                headers={"Content-Type": "application/json"},
            )
        system = (await api.get(f"/api/v1/systems/{system_id}")).json()
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == (
        "request body: the key 'energy_wh' is given twice in one object; give each key once"
    )
    assert system["first_reading_at"] is None


async def test_keys_and_bad_tokens_are_refused_at_the_ingest_endpoint(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        with_key = await api.post("/api/v1/ingest/readings", json=_readings(1))
    assert with_key.status_code == 401
    assert "ingest token" in with_key.json()["error"]
    assert with_key.headers["www-authenticate"].lower().startswith("bearer")
    forged = "ik_" + "b" * 32 + checksum("b" * 32)
    for token in (forged, forged[:-1] + "x"):
        async with client_for(app, token) as logger:
            answer = await logger.post("/api/v1/ingest/readings", json=_readings(1))
        assert answer.status_code == 401
    # A real token with one character changed has the right shape: the message says it was
    # mistyped (its checksum), as for API keys, not what tokens look like.
    async with client_for(app, enterprise.live) as api:
        real = (await _token(api, await _system(api)))["token"]
    typo = real[:10] + ("x" if real[10] != "x" else "y") + real[11:]
    async with client_for(app, typo) as logger:
        mistyped = await logger.post("/api/v1/ingest/readings", json=_readings(1))
    assert mistyped.status_code == 401
    assert mistyped.json() == {
        "error": "malformed ingest token: its last 6 characters (a checksum) do not match the "
        "rest; the ingest token was mistyped or changed while copying",
        "code": "unauthorized",
    }
    async with client_for(app, "ik_short") as logger:
        short = await logger.post("/api/v1/ingest/readings", json=_readings(1))
    assert short.json()["error"] == (
        "malformed ingest token: tokens look like ik_ followed by 38 letters and digits"
    )
    async with client_for(app) as nobody:
        missing = await nobody.post("/api/v1/ingest/readings", json=_readings(1))
        basic = await nobody.post(
            "/api/v1/ingest/readings", json=_readings(1), headers={"Authorization": "Basic eA=="}
        )
    # A logger without its token is told to send one, not an API key (which is refused here).
    assert missing.status_code == 401
    assert missing.json()["error"] == (
        "missing Authorization header; send 'Authorization: Bearer <ingest token ik_…>'"
    )
    assert basic.status_code == 401
    assert basic.json()["error"] == (
        "malformed Authorization header; expected 'Bearer <ingest token ik_…>'"
    )


async def test_a_loggers_retry_with_its_idempotency_key_is_answered_once(
    app: FastAPI, enterprise: Tenant
) -> None:
    """Every POST accepts `Idempotency-Key`, a logger's upload too: its keys are its token's,
    so a retry of an upload whose answer was lost replays the first answer (not `inserted:
    0, updated: 4`) and raises no second `readings.uploaded`; another logger, or an API key,
    using the same key is not refused for it."""
    body = _readings(4)
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        other_id = await _system(api)
        token = (await _token(api, system_id))["token"]
        other_token = (await _token(api, other_id))["token"]
    retry = {"Idempotency-Key": "logger-batch-0001"}
    async with client_for(app, token) as logger:
        first = await logger.post("/api/v1/ingest/readings", json=body, headers=retry)
        again = await logger.post("/api/v1/ingest/readings", json=body, headers=retry)
        changed = await logger.post("/api/v1/ingest/readings", json=_readings(2), headers=retry)
    assert first.status_code == 200, first.text
    assert first.json() == {"received": 4, "inserted": 4, "updated": 0}
    assert "idempotent-replayed" not in first.headers
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert changed.status_code == 409
    assert changed.json()["code"] == "conflict"
    assert "logger-batch-0001" in changed.json()["error"]
    async with client_for(app, other_token) as other_logger:
        elsewhere = await other_logger.post("/api/v1/ingest/readings", json=body, headers=retry)
    assert elsewhere.status_code == 200, elsewhere.text
    assert "idempotent-replayed" not in elsewhere.headers
    assert elsewhere.json() == {"received": 4, "inserted": 4, "updated": 0}
    async with client_for(app, enterprise.live) as api:
        by_key = await api.post(f"/api/v1/systems/{system_id}/readings", json=body, headers=retry)
        assert by_key.status_code == 200, by_key.text
        assert "idempotent-replayed" not in by_key.headers
        assert by_key.json() == {"received": 4, "inserted": 0, "updated": 4}
        events = await api.get("/api/v1/events", params={"type": "readings.uploaded"})
    uploads = [event["data"]["system_id"] for event in events.json()["data"]]
    # One event per upload that ran: the logger's first, the other logger's, the API key's.
    assert sorted(uploads) == sorted([system_id, other_id, system_id])


async def test_a_tokens_idempotency_keys_go_with_the_token(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        created = await _token(api, system_id)
    async with client_for(app, created["token"]) as logger:
        answer = await logger.post(
            "/api/v1/ingest/readings", json=_readings(1), headers={"Idempotency-Key": "k1"}
        )
        assert answer.status_code == 200, answer.text
    async with app.state.sessionmaker() as session:
        kept = await session.scalars(
            select(IdempotencyRecord.ingest_token_id).where(
                IdempotencyRecord.idempotency_key == "k1"
            )
        )
        assert list(kept) == [created["id"]]
    async with client_for(app, enterprise.live) as api:
        assert (await api.delete(f"/api/v1/systems/{system_id}")).status_code == 204
    async with app.state.sessionmaker() as session:
        left = await session.scalars(
            select(IdempotencyRecord.id).where(IdempotencyRecord.idempotency_key == "k1")
        )
        assert list(left) == []


async def test_revoking_and_deleting_the_system_end_the_token(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        first = await _token(api, system_id, "first")
        second = await _token(api, system_id, "second")
        revoked = await api.delete(f"/api/v1/systems/{system_id}/ingest-tokens/{first['id']}")
        assert revoked.status_code == 204
        listed = await api.get(f"/api/v1/systems/{system_id}/ingest-tokens")
        assert [t["id"] for t in listed.json()["data"]] == [second["id"]]
    async with client_for(app, first["token"]) as logger:
        answer = await logger.post("/api/v1/ingest/readings", json=_readings(1))
        assert answer.status_code == 401
        assert answer.json()["error"] == "invalid or revoked ingest token"
    async with client_for(app, enterprise.live) as api:
        assert (await api.delete(f"/api/v1/systems/{system_id}")).status_code == 204
    async with client_for(app, second["token"]) as logger:
        assert (await logger.post("/api/v1/ingest/readings", json=_readings(1))).status_code == 401


async def test_a_token_has_its_own_minute_window(
    app: FastAPI, enterprise: Tenant, clock: TestClock
) -> None:
    async with client_for(app, enterprise.live) as api:
        system_id = await _system(api)
        token = (await _token(api, system_id))["token"]
    clock.pinned = (datetime.now(UTC) + timedelta(hours=3)).replace(second=5).timestamp()
    async with client_for(app, token) as logger:
        for used in range(1, 61):
            answer = await logger.post("/api/v1/ingest/readings", json=_readings(1))
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-ratelimit-remaining-minute"] == str(60 - used)
        refused = await logger.post("/api/v1/ingest/readings", json=_readings(1))
        assert refused.status_code == 429
        assert refused.json()["code"] == "rate_limit"
        assert refused.headers["retry-after"] == "55"
    # The account's own key still has its whole window: the token's requests are not in it.
    async with client_for(app, enterprise.live) as api:
        account = await api.get("/api/v1/account")
        assert account.json()["usage"]["minute"] == 1


async def test_a_starter_account_manages_tokens_in_the_dashboard(
    app: FastAPI, starter: Tenant
) -> None:
    await _dashboard_token_flow(app, starter)


async def test_a_pro_account_manages_tokens_in_the_dashboard(app: FastAPI, pro: Tenant) -> None:
    await _dashboard_token_flow(app, pro)


async def _dashboard_token_flow(app: FastAPI, tenant: Tenant) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, tenant.email, tenant.password)
        form = await browser.get("/systems/new")
        created = await browser.post(
            "/systems/new",
            data={
                "csrf": csrf_of(form),
                "name": "Dak",
                "capacity_kwp": "5",
                "latitude": "52.1",
                "longitude": "5.1",
                "timezone": "Europe/Amsterdam",
                "status": "active",
                "environment": "live",
            },
        )
        system_path = created.headers["location"].split("?")[0]
        page = await browser.get(system_path)
        shown = await browser.post(
            f"{system_path}/ingest-tokens",
            data={"csrf": csrf_of(page), "nonce": nonce_of(page), "name": "roof logger"},
        )
        assert shown.status_code == 200
        token = text_of(shown).split('id="new-key" class="new-key">')[1].split("<")[0]
        assert TOKEN_PATTERN.match(token)
        page = await browser.get(system_path)
        assert token not in page.text
        assert f"{token[:7]}…{token[-4:]}" in text_of(page)
        async with client_for(app, token) as logger:
            uploaded = await logger.post("/api/v1/ingest/readings", json=_readings(2))
            assert uploaded.status_code == 200, uploaded.text
        token_id = page.text.split('<tr id="token-')[1].split('"')[0]
        revoked = await browser.post(
            f"{system_path}/ingest-tokens/{token_id}/revoke", data={"csrf": csrf_of(page)}
        )
        assert revoked.status_code == 303
        async with client_for(app, token) as logger:
            assert (
                await logger.post("/api/v1/ingest/readings", json=_readings(1))
            ).status_code == 401
