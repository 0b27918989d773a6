"""Request bodies (both databases): a limit per endpoint sized to what it can need, so a body
bomb is refused before it is parsed; duplicate keys refused; one rule for a byte order mark;
a body announced by any Transfer-Encoding is checked for its type; two Authorization headers
use neither."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import orjson
import pytest
from fastapi import FastAPI

from solarapi.kit.bodylimit import SMALL_BODY
from solarapi.readings.router import UPLOAD_BODY
from tests.support import Tenant, client_for
from tests.systems.factories import system_body

# 3.4 M empty items in 9.7 MB, under the server's 10 MiB limit: seconds of parsing.
BOMB = b'{"readings":[' + b",".join([b"[]"] * 3_400_000) + b"]}"


async def _system(client: httpx.AsyncClient) -> str:
    created = await client.post("/api/v1/systems", json=system_body())
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


@pytest.mark.parametrize("target", ["/api/v1/systems", "/api/v1/systems/{id}/readings"])
async def test_a_body_bomb_is_refused_before_it_is_parsed(
    app: FastAPI, enterprise: Tenant, target: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        path = target.replace("{id}", await _system(client))
        started = time.perf_counter()
        response = await client.post(
            path, content=BOMB, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413, response.text
        assert response.json()["code"] == "payload_too_large"
        limit = UPLOAD_BODY if "readings" in target else SMALL_BODY
        assert str(limit) in response.json()["error"]
        assert time.perf_counter() - started >= 0  # (no timing assertion: see the bench)


async def test_a_chunked_bomb_is_cut_off_at_the_endpoints_limit(
    app: FastAPI, enterprise: Tenant
) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for start in range(0, len(BOMB), 65536):
            yield BOMB[start : start + 65536]

    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/systems", content=chunks(), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 413, response.text
    assert str(SMALL_BODY) in response.json()["error"]
    # The server closes the connection rather than read the rest: the answer says so, as the
    # 413 of a Content-Length over the limit does.
    assert response.headers["connection"] == "close"


async def test_ten_thousand_readings_fit_the_upload_limit(app: FastAPI, enterprise: Tenant) -> None:
    first = datetime(2025, 5, 1, tzinfo=UTC)
    items = [
        {
            "timestamp": (first + i * timedelta(minutes=15)).isoformat(timespec="milliseconds"),
            "energy_wh": 1.5,
            "power_w": 6.0,
        }
        for i in range(10_000)
    ]
    body = orjson.dumps({"readings": items}, option=orjson.OPT_INDENT_2)
    assert len(body) <= UPLOAD_BODY
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client)
        response = await client.post(
            f"/api/v1/systems/{system_id}/readings",
            content=body,
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 200, response.text
    assert response.json()["inserted"] == 10_000


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("/api/v1/systems", b'{"name": "a", "name": "b", "capacity_kwp": 5}'),
        (
            "/api/v1/systems/{id}/readings",
            b'{"readings": [{"timestamp": "2025-06-01T00:00:00Z", "energy_wh": 1,'
            b' "energy_wh": 2}]}',
        ),
    ],
    ids=["systems", "readings"],
)
async def test_a_key_given_twice_is_refused(
    app: FastAPI, enterprise: Tenant, target: str, body: bytes
) -> None:
    async with client_for(app, enterprise.live) as client:
        path = target.replace("{id}", await _system(client))
        response = await client.post(
            path, content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert "given twice" in response.json()["error"]


@pytest.mark.parametrize("target", ["/api/v1/systems", "/api/v1/systems/{id}/readings"])
async def test_a_byte_order_mark_is_refused_everywhere(
    app: FastAPI, enterprise: Tenant, target: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        path = target.replace("{id}", await _system(client))
        valid = orjson.dumps(system_body())
        response = await client.post(
            path, content=b"\xef\xbb\xbf" + valid, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert "byte order mark" in response.json()["error"]


async def test_any_transfer_encoding_is_checked_for_json(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/systems",
            content=b"name=x",
            headers={"Content-Type": "text/plain", "Transfer-Encoding": "gzip, chunked"},
        )
    assert response.status_code == 415, response.text
    assert response.json()["code"] == "unsupported_media_type"


async def test_two_authorization_headers_use_neither(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    async with client_for(app) as client:
        response = await client.get(
            "/api/v1/account",
            headers=[
                ("Authorization", f"Bearer {pro.live}"),
                ("Authorization", f"Bearer {enterprise.live}"),
            ],
        )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert "more than one Authorization header" in response.json()["error"]


# 50,000 nested arrays in 100 KB: deeper than Python's recursion limit, so a recursive
# decoder gives up (a RecursionError, which is no ValueError), under every body limit.
DEEP = b'{"readings":' + b"[" * 50_000 + b"]" * 50_000 + b"}"


@pytest.mark.parametrize(
    "target",
    ["/api/v1/systems/{id}/readings", "/api/v1/systems/{id}/irradiance", "/api/v1/ingest/readings"],
)
async def test_a_body_nested_too_deeply_is_a_400_not_a_500(
    app: FastAPI, enterprise: Tenant, target: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client)
        token = await client.post(
            f"/api/v1/systems/{system_id}/ingest-tokens", json={"name": "logger"}
        )
        assert token.status_code == 201, token.text
    key = token.json()["token"] if "ingest" in target else enterprise.live
    async with client_for(app, key) as client:
        response = await client.post(
            target.replace("{id}", system_id),
            content=DEEP,
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert response.json()["error"].startswith("request body is not valid JSON"), response.text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "request body is required: send a JSON object"),
        (b"[]", "request body must be a JSON object"),
        (b'"Rooftop"', "request body must be a JSON object"),
        (b"null", "request body must be a JSON object"),
        (b'{"name": "' + b"[" * 50_000 + b'"}', None),  # (a long string: valid, then refused)
        (b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "request body is not valid JSON"),
        (b'{"name": "\xff\xfe"}', "request body is not valid UTF-8"),
        (b'{"capacity_kwp": 1' + b"0" * 5000 + b"}", "request body is not valid JSON"),
    ],
    ids=["empty", "array", "string", "null", "long-string", "deep", "not-utf8", "huge-number"],
)
@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_body_the_framework_cannot_read_is_named_as_the_body(
    app: FastAPI, enterprise: Tenant, body: bytes, message: str | None, method: str
) -> None:
    """Bodies read by the framework (every endpoint but the uploads): the message says that
    the body is what is wrong, never an anonymous "is required" or "There was an error
    parsing the body"."""
    async with client_for(app, enterprise.live) as client:
        path = "/api/v1/systems" if method == "POST" else f"/api/v1/systems/{await _system(client)}"
        response = await client.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    error = response.json()["error"]
    assert "There was an error parsing the body" not in error
    assert not error.startswith(("is required", "Input should be"))
    if message is not None:
        assert error.startswith(message), error
