"""`GET /readings/changes`: pages, NDJSON, cursors (signed, bound, expiring), tenancy,
simulated and deleted systems, on both databases."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from solarapi.changes import cursor
from solarapi.changes.cursor import Position
from solarapi.changes.rendering import wants_stream
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload

JUNE = datetime(2025, 6, 15, tzinfo=UTC)


async def follow(
    client: httpx.AsyncClient, token: str | None = None, limit: int = 1000
) -> tuple[list[dict[str, Any]], str]:
    """Every row after `token`, following next_cursor until has_more is false (backing off
    while pages come back empty with `has_more`: committed rows held back behind an older
    transaction of the PostgreSQL server, another test's or another process's included)."""
    rows: list[dict[str, Any]] = []
    pause = 0.05
    while True:
        params: dict[str, Any] = {"limit": limit}
        if token is not None:
            params["cursor"] = token
        response = await client.get("/api/v1/readings/changes", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        rows += body["data"]
        token = body["next_cursor"]
        if not body["has_more"]:
            return rows, token
        if not body["data"]:
            await asyncio.sleep(pause)
            pause = min(2 * pause, 1.0)


async def ndjson_page(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    """One NDJSON page's lines; asked again (backing off, for at most a minute) while it is
    empty with `has_more`: on PostgreSQL committed rows wait while any older transaction of
    the server is still open, another test's or another process's included."""
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + 60, 0.05
    while True:
        response = await client.get(
            "/api/v1/readings/changes", params=params, headers={"Accept": "application/x-ndjson"}
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [orjson.loads(line) for line in response.text.splitlines()]
        if len(lines) > 1 or not lines[-1]["has_more"] or loop.time() > deadline:
            return lines
        await asyncio.sleep(pause)
        pause = min(2 * pause, 1.0)


def as_copy(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, float | None]]:
    copy: dict[tuple[str, str], tuple[float, float | None]] = {}
    for row in rows:
        copy[row["system_id"], row["timestamp"]] = (row["energy_wh"], row["power_w"])
    return copy


async def test_feed_pages_and_replacements(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        first = (await create_system(client))["id"]
        second = (await create_system(client))["id"]
        assert (await upload(client, first, quarter_series(JUNE, 8, 100, 400))).status_code == 200
        rows, token = await follow(client, limit=3)
        assert [(row["system_id"], row["energy_wh"], row["power_w"]) for row in rows] == [
            (first, 100.0, 400.0)
        ] * 8
        assert rows[0]["timestamp"] == "2025-06-15T00:00:00Z"
        # Nothing new: an empty page and the same position.
        again = (await client.get("/api/v1/readings/changes", params={"cursor": token})).json()
        assert again["data"] == []
        assert again["has_more"] is False
        await upload(client, second, quarter_series(JUNE, 2, 50))
        await upload(client, first, quarter_series(JUNE + timedelta(minutes=30), 2, 70))
        more, _ = await follow(client, token)
    assert [(row["system_id"], row["energy_wh"]) for row in more] == [
        (second, 50.0),
        (second, 50.0),
        (first, 70.0),
        (first, 70.0),
    ]
    copy = as_copy(rows + more)
    assert len(copy) == 10
    assert copy[first, "2025-06-15T00:30:00Z"] == (70.0, None)


async def test_ndjson_stream(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(JUNE, 96, 10))
        lines = await ndjson_page(client, limit=50)
        assert len(lines) == 51
        assert lines[-1]["has_more"] is True
        assert lines[0] == {
            "system_id": system_id,
            "timestamp": "2025-06-15T00:00:00Z",
            "energy_wh": 10.0,
            "power_w": None,
        }
        tail = await ndjson_page(client, cursor=lines[-1]["next_cursor"])
        # Default NDJSON limit is 100,000: the rest in one answer.
        assert len(tail) == 47
        assert tail[-1]["has_more"] is False
        too_many = await client.get("/api/v1/readings/changes", params={"limit": 10_001})
        assert too_many.status_code == 400
        many = await client.get(
            "/api/v1/readings/changes",
            params={"limit": 100_000},
            headers={"Accept": "application/x-ndjson"},
        )
        assert many.status_code == 200


@pytest.mark.parametrize(
    ("accept", "stream"),
    [
        ("application/x-ndjson", True),
        ("application/x-ndjson; charset=utf-8", True),
        ("application/json, application/x-ndjson", True),
        ("application/json;q=0.5, application/x-ndjson", True),
        ("application/x-ndjson;q=0.9, */*;q=0.1", True),
        ("application/x-ndjson;q=oops", True),
        ("", False),
        ("*/*", False),
        ("application/*", False),
        ("application/json", False),
        ("application/x-ndjson;q=0, application/json", False),
        ("application/x-ndjson;q=0", False),
        ("application/x-ndjson;q=0.4, application/json;q=0.9", False),
        ("application/x-ndjson;q=0.4, */*", False),
        ("text/html", False),
    ],
)
def test_the_stream_is_chosen_by_the_accept_header_with_its_q_values(
    accept: str, stream: bool
) -> None:
    assert wants_stream(accept) is stream


async def test_an_accept_that_rules_ndjson_out_gets_json(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(JUNE, 4, 10))
        # Once `follow` has them, no older transaction of the server can hold them back.
        assert len((await follow(client))[0]) == 4
        refused = await client.get(
            "/api/v1/readings/changes",
            headers={"Accept": "application/x-ndjson;q=0, application/json"},
        )
        preferred = await client.get(
            "/api/v1/readings/changes",
            headers={"Accept": "application/json;q=0.5, application/x-ndjson"},
        )
    assert refused.status_code == 200
    assert refused.headers["content-type"].startswith("application/json")
    assert len(refused.json()["data"]) == 4
    assert preferred.headers["content-type"].startswith("application/x-ndjson")
    assert len(preferred.text.splitlines()) == 5


async def test_environments_and_tenants_are_apart(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    async with client_for(app, enterprise.live) as live, client_for(app, enterprise.test) as test:
        system_id = (await create_system(live))["id"]
        await upload(live, system_id, quarter_series(JUNE, 4, 10))
        sandbox_metered = (await create_system(test, data_source="metered"))["id"]
        await upload(test, sandbox_metered, quarter_series(JUNE, 2, 20))
        await create_system(test)  # simulated: never in the feed
        live_rows, live_token = await follow(live)
        test_rows, test_token = await follow(test)
        assert {row["system_id"] for row in live_rows} == {system_id}
        assert {row["system_id"] for row in test_rows} == {sandbox_metered}
        # A cursor of the other environment is refused.
        foreign = await live.get("/api/v1/readings/changes", params={"cursor": test_token})
        assert foreign.status_code == 400
        assert "start again without a cursor" in foreign.json()["error"]
    async with client_for(app, pro.live) as other:
        nothing, _ = await follow(other)
        assert nothing == []
        stolen = await other.get("/api/v1/readings/changes", params={"cursor": live_token})
        assert stolen.status_code == 400
        assert stolen.json()["code"] == "validation"


@pytest.mark.parametrize(
    "bad",
    ["x", "not-a-cursor!!", "A" * 55, "A" * 500, "%00", "AAAA"],
)
async def test_malformed_cursors(app: FastAPI, pro: Tenant, bad: str) -> None:
    async with client_for(app, pro.live) as client:
        response = await client.get("/api/v1/readings/changes", params={"cursor": bad})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "validation"
    assert "start again without a cursor" in body["error"]


async def test_a_cursor_is_refused_unless_it_is_exactly_as_issued(
    app: FastAPI, pro: Tenant
) -> None:
    """Found by fuzzing: base64 decoding forgave padding, `+`/`/` for `-`/`_`, characters
    outside the alphabet and the last character's unused bits, so strings other than the
    issued cursor (and outside the documented pattern) were answered 200 as if they were it."""
    async with client_for(app, pro.live) as client:
        token = (await client.get("/api/v1/readings/changes")).json()["next_cursor"]
        assert len(token) == 66
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        # The last character carries 2 bits of the 49 bytes and 4 unused ones.
        same_bits = alphabet[alphabet.index(token[-1]) ^ 1]
        altered = [
            token + "=",
            token + "==",
            "!!!!!!!!" + token,
            token[:-1] + same_bits,
        ]
        if (standard := token.translate(str.maketrans("-_", "+/"))) != token:
            altered.append(standard)  # the standard base64 alphabet's spelling
        for bad in altered:
            response = await client.get("/api/v1/readings/changes", params={"cursor": bad})
            assert response.status_code == 400, (bad, response.text)
            assert response.json()["code"] == "validation"
            assert "start again without a cursor" in response.json()["error"]
        assert (
            await client.get("/api/v1/readings/changes", params={"cursor": token})
        ).status_code == 200


async def test_tampered_and_expired_cursors(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        token = (await client.get("/api/v1/readings/changes")).json()["next_cursor"]
        raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        raw[10] ^= 1  # move the position
        tampered = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
        response = await client.get("/api/v1/readings/changes", params={"cursor": tampered})
        assert response.status_code == 400
        now = datetime.now(UTC)
        secret = app.state.settings.effective_secret_key
        old = cursor.encode(
            Position(0, 0),
            secret=secret,
            account_id=pro.account_id,
            environment="live",
            now=now - timedelta(days=31),
        )
        expired = await client.get("/api/v1/readings/changes", params={"cursor": old})
        assert expired.status_code == 400
        assert "expired" in expired.json()["error"]
        recent = cursor.encode(
            Position(0, 0),
            secret=secret,
            account_id=pro.account_id,
            environment="live",
            now=now - timedelta(days=29),
        )
        assert (
            await client.get("/api/v1/readings/changes", params={"cursor": recent})
        ).status_code == 200


async def test_deleted_systems_leave_the_feed(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        kept = (await create_system(client))["id"]
        gone = (await create_system(client))["id"]
        await upload(client, gone, quarter_series(JUNE, 4, 10))
        _, token = await follow(client)
        await upload(client, gone, quarter_series(JUNE, 4, 20))
        await upload(client, kept, quarter_series(JUNE, 4, 30))
        assert (await client.delete(f"/api/v1/systems/{gone}")).status_code == 204
        rows, _ = await follow(client, token)
        everything, _ = await follow(client)
    assert {row["system_id"] for row in rows} == {kept}
    assert {row["system_id"] for row in everything} == {kept}
