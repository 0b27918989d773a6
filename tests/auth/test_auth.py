"""Authentication over HTTP: every 401 case, revocation, environments, last_used_at, and
the key never showing up in a response or a log line."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import event, select

from solarapi.accounts.service import set_plan
from solarapi.auth.keys import BASE62, generate_key
from solarapi.auth.service import revoke_key
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.models import ApiKey
from tests.support import LogCapture, Tenant, TestClock, client_for

ACCOUNT = "/api/v1/account"


def _tamper_checksum(key: str) -> str:
    last = key[-1]
    return key[:-1] + BASE62[(BASE62.index(last) + 1) % 62]


def _assert_401(response: Any, fragment: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    body = response.json()
    assert set(body) == {"error", "code"}
    assert body["code"] == "unauthorized"
    assert fragment in body["error"]


@pytest.mark.parametrize(
    ("authorization", "fragment"),
    [
        (None, "missing Authorization header"),
        ("", "missing Authorization header"),
        ("   ", "missing Authorization header"),
        ("Basic dXNlcjpwYXNz", "malformed Authorization header"),
        ("Token {key}", "malformed Authorization header"),
        ("{key}", "malformed Authorization header"),
        ("Bearer", "malformed Authorization header"),
        ("Bearer    ", "malformed Authorization header"),
        ("Bearer abc", "malformed key"),
        ("Bearer pk_prod_{tail}", "malformed key"),
        ("Bearer {key}x", "followed by 38 letters and digits"),
        ("Bearer {short}", "followed by 38 letters and digits"),
        ("Bearer {bad_checksum}", "malformed key: its last 6 characters (a checksum) do not"),
        ("Bearer {unknown}", "invalid or revoked key"),
    ],
)
async def test_each_401_case(
    app: FastAPI, pro: Tenant, authorization: str | None, fragment: str
) -> None:
    real = pro.live
    values = {
        "key": real,
        "tail": real[8:],
        "short": real[:-1],
        "bad_checksum": _tamper_checksum(real),
        "unknown": generate_key(Environment.LIVE).key,
    }
    headers = {} if authorization is None else {"Authorization": authorization.format(**values)}
    async with client_for(app) as client:
        response = await client.get(ACCOUNT, headers=headers)
    _assert_401(response, fragment)
    # Whatever was sent, the message never quotes it back or names a stored key.
    assert real not in response.text
    assert pro.key_ids[Environment.LIVE] not in response.text
    assert real[:12] not in response.text


async def test_scheme_word_is_case_insensitive(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app) as client:
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            response = await client.get(ACCOUNT, headers={"Authorization": f"{scheme} {pro.live}"})
            assert response.status_code == 200, (scheme, response.text)


async def test_key_outside_the_authorization_header_is_refused(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app) as client:
        in_query = await client.get(ACCOUNT, params={"api_key": pro.live})
        in_cookie = await client.get(ACCOUNT, headers={"Cookie": f"api_key={pro.live}"})
        in_other_header = await client.get(ACCOUNT, headers={"X-API-Key": pro.live})
    for response in (in_query, in_cookie, in_other_header):
        _assert_401(response, "missing Authorization header")


async def test_revocation_applies_on_the_very_next_request(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        assert (await client.get(ACCOUNT)).status_code == 200
        async with app.state.sessionmaker() as session, session.begin():
            await revoke_key(session, key_id=pro.key_ids[Environment.LIVE], now=utcnow())
        revoked = await client.get(ACCOUNT)
    _assert_401(revoked, "invalid or revoked key")
    # Revoked and never-issued keys are indistinguishable to the caller.
    async with client_for(app, generate_key(Environment.LIVE).key) as client:
        unknown = await client.get(ACCOUNT)
    assert unknown.json() == revoked.json()
    # The other key of the account is untouched.
    async with client_for(app, pro.test) as client:
        assert (await client.get(ACCOUNT)).status_code == 200


async def test_test_key_reports_the_test_environment(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        test = (await client.get(ACCOUNT)).json()
    async with client_for(app, enterprise.live) as client:
        live = (await client.get(ACCOUNT)).json()
    assert (test["environment"], live["environment"]) == ("test", "live")
    assert test["id"] == live["id"] == enterprise.account_id
    assert test["key"]["id"] == enterprise.key_ids[Environment.TEST]
    assert live["key"]["id"] == enterprise.key_ids[Environment.LIVE]
    assert test["key"]["display"] == f"{enterprise.test[:12]}…{enterprise.test[-4:]}"
    assert test["limits"] == {"per_minute": 300, "per_day": 100000}


async def test_plan_change_applies_to_an_existing_key_at_once(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        assert (await client.get("/api/v1/declarations")).status_code == 403
        async with app.state.sessionmaker() as session, session.begin():
            await set_plan(session, email_or_id=pro.email, plan=Plan.ENTERPRISE)
        upgraded = await client.get(ACCOUNT)
        assert upgraded.json()["plan"] == "enterprise"
        assert upgraded.json()["limits"]["per_minute"] == 300
        assert upgraded.headers["x-ratelimit-limit-minute"] == "300"
        assert (await client.get("/api/v1/declarations")).status_code != 403
        async with app.state.sessionmaker() as session, session.begin():
            await set_plan(session, email_or_id=pro.account_id, plan=Plan.STARTER)
        downgraded = await client.get(ACCOUNT)
    assert downgraded.status_code == 403
    assert "Starter plan has no API access" in downgraded.json()["error"]


class _KeyWrites:
    """Counts UPDATEs of one key's row that really changed it (rowcount), on the real engine."""

    def __init__(self, app: FastAPI, key_id: str) -> None:
        self.engine = app.state.engine.sync_engine
        self.key_id = key_id
        self.statements = 0
        self.rows = 0

    def _after(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE API_KEYS") and self.key_id in str(params):
            self.statements += 1
            self.rows += max(cursor.rowcount, 0)

    def __enter__(self) -> _KeyWrites:
        event.listen(self.engine, "after_cursor_execute", self._after)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(self.engine, "after_cursor_execute", self._after)


async def _last_used(app: FastAPI, key_id: str) -> Any:
    async with app.state.sessionmaker() as session:
        return await session.scalar(select(ApiKey.last_used_at).where(ApiKey.id == key_id))


async def test_last_used_at_is_written_at_most_once_per_key_per_minute(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    key_id = pro.key_ids[Environment.LIVE]
    start = float(int(time.time()))
    clock.pinned = start
    async with client_for(app, pro.live) as client:
        assert await _last_used(app, key_id) is None
        with _KeyWrites(app, key_id) as writes:
            for _ in range(15):
                assert (await client.get(ACCOUNT)).status_code == 200
        assert writes.rows == 1
        assert writes.statements == 1
        first = await _last_used(app, key_id)
        assert first is not None
        assert first.timestamp() == start

        clock.pinned = start + 59
        with _KeyWrites(app, key_id) as writes:
            body = (await client.get(ACCOUNT)).json()
        assert writes.rows == 0
        # /account reports the stored value, which is at most a minute old.
        assert body["key"]["last_used_at"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")

        clock.pinned = start + 61
        with _KeyWrites(app, key_id) as writes:
            for _ in range(5):
                await client.get(ACCOUNT)
        assert writes.rows == 1
        assert (await _last_used(app, key_id)).timestamp() == start + 61


async def test_concurrent_first_requests_write_last_used_at_once(
    app: FastAPI, enterprise: Tenant
) -> None:
    key_id = enterprise.key_ids[Environment.LIVE]
    async with client_for(app, enterprise.live) as client:
        with _KeyWrites(app, key_id) as writes:
            responses = await asyncio.gather(*(client.get(ACCOUNT) for _ in range(20)))
    assert all(r.status_code == 200 for r in responses)
    # Requests that raced past the in-memory check still change the row only once.
    assert writes.rows == 1


async def test_a_kept_key_due_for_last_used_at_is_written_by_one_request_of_many(
    app: FastAPI, enterprise: Tenant, clock: TestClock
) -> None:
    """A busy key (an integration's reads, 16 in flight) comes due for its once-a-minute
    `last_used_at` in every request at once: one writes it, the others are answered with
    the kept caller meanwhile. Each used to write it itself — on SQLite one at a time, the
    rest sleeping in the busy handler (a fleet's reads took up to 800 ms once a minute)."""
    key_id = enterprise.key_ids[Environment.LIVE]
    start = float(int(time.time()))
    clock.pinned = start
    async with client_for(app, enterprise.live) as client:
        for _ in range(2):  # the first use writes `last_used_at`; the second keeps the caller
            assert (await client.get(ACCOUNT)).status_code == 200
        clock.pinned = start + 61
        with _KeyWrites(app, key_id) as writes:
            responses = await asyncio.gather(*(client.get(ACCOUNT) for _ in range(16)))
        assert all(r.status_code == 200 for r in responses)
        assert writes.statements == 1
        assert writes.rows == 1
        assert (await _last_used(app, key_id)).timestamp() == start + 61
        # Written, the key is read again once and kept: no further write this minute.
        with _KeyWrites(app, key_id) as writes:
            for _ in range(3):
                assert (await client.get(ACCOUNT)).status_code == 200
        assert writes.statements == 0


async def test_last_used_at_is_kept_when_the_endpoint_fails(app: FastAPI, pro: Tenant) -> None:
    # Authentication commits its own write: the endpoint's rollback (here after a 404) must
    # not take `last_used_at` with it.
    key_id = pro.key_ids[Environment.LIVE]
    async with client_for(app, pro.live) as client:
        missing = await client.get("/api/v1/systems/sys_does_not_exist/readings")
    assert missing.status_code == 404
    assert await _last_used(app, key_id) is not None


async def test_key_never_appears_in_log_lines(
    app: FastAPI, enterprise: Tenant, log_lines: LogCapture
) -> None:
    key = enterprise.live
    async with client_for(app, key) as client:
        ok = await client.get(ACCOUNT)
        # Clients do leak keys in odd places; none of these may reach the log verbatim.
        await client.get(f"/api/v1/systems/{key}")
        await client.get(ACCOUNT, params={"api_key": key})
        await client.get(ACCOUNT, headers={"X-Request-Id": key})
        await client.get(ACCOUNT, headers={"Authorization": f"Bearer {key}x"})
    assert ok.status_code == 200
    assert log_lines.lines
    assert key not in log_lines.text
    assert key[8:] not in log_lines.text
    requests = [orjson.loads(line) for line in log_lines.lines]
    requests = [r for r in requests if r["msg"] == "request"]
    assert len(requests) == 5
    first = requests[0]
    assert first["key_id"] == enterprise.key_ids[Environment.LIVE]
    assert first["route"] == "/api/v1/account"
    assert first["status"] == 200
    assert first["method"] == "GET"
    assert first["request_id"] == ok.headers["x-request-id"]
    assert isinstance(first["latency_ms"], float | int)
    # A request id that looks like a key is logged in display form only.
    assert any(r["request_id"] == f"{key[:12]}…{key[-4:]}" for r in requests)
