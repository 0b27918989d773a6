"""Bad input is a 400 `validation` with a short message, never a 500 or a 503, on SQLite and
PostgreSQL, and nothing is stored: NUL characters, timestamps outside years 1–9999 once in
UTC, time-zone names outside the tz database, and input too long to echo."""

from __future__ import annotations

import errno
import socket
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from solarapi.dbfaults import DatabaseUnreachable, is_database_unavailable
from solarapi.kit.text import QUOTE_LIMIT, JsonNulScanner, excerpt, url_has_nul
from solarapi.kit.timefmt import TimestampError, parse_timestamp
from solarapi.kit.tznames import check_time_zone, tz_database_names
from tests.dashboard.helpers import browser_for, csrf_of, log_in, new_email, text_of
from tests.support import Tenant, assert_error, client_for
from tests.systems.factories import create_system, system_body

NUL = "\x00"
# Error messages stay short whatever was sent: a prefix of the input plus the sentence.
SHORT_MESSAGE = 400


async def _system_count(client: httpx.AsyncClient) -> int:
    response = await client.get("/api/v1/systems")
    assert response.status_code == 200, response.text
    return int(response.json()["pagination"]["total"])


def _assert_nul_refused(response: httpx.Response) -> None:
    body = assert_error(response, 400, "validation")
    assert "NUL" in body["error"], body
    assert len(body["error"]) < SHORT_MESSAGE


# --- 5. NUL characters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        system_body(name=f"Roof{NUL}top"),
        system_body(location={"latitude": 1, "longitude": 1, "timezone": f"UTC{NUL}"}),
        system_body(market_zone=NUL),
        {**system_body(), f"na{NUL}me": "x"},
    ],
    ids=["name", "nested-timezone", "whole-value", "field-name"],
)
async def test_a_nul_in_a_json_body_is_refused_and_nothing_is_stored(
    app: FastAPI, enterprise: Tenant, body: dict[str, Any]
) -> None:
    async with client_for(app, enterprise.live) as client:
        before = await _system_count(client)
        response = await client.post("/api/v1/systems", json=body)
        _assert_nul_refused(response)
        assert await _system_count(client) == before


async def test_a_nul_is_refused_in_every_kind_of_body(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await create_system(client)
        path = f"/api/v1/systems/{system['id']}"
        renamed = await client.patch(path, json={"name": f"x{NUL}"})
        _assert_nul_refused(renamed)
        assert (await client.get(path)).json()["name"] == system["name"]

        readings = [{"timestamp": f"2025-05-01T00:00:00Z{NUL}", "energy_wh": 1.0}]
        uploaded = await client.post(f"{path}/readings", json={"readings": readings})
        _assert_nul_refused(uploaded)

        declared = await client.post(
            "/api/v1/declarations",
            json={
                "system_id": system["id"],
                "type": "feed_in",
                "period_start": "2025-05-01",
                "period_end": "2025-05-01",
                "reference": f"GO{NUL}",
            },
        )
        _assert_nul_refused(declared)
        listed = await client.get("/api/v1/declarations", params={"system_id": system["id"]})
        assert listed.json()["data"] == []

        hook = await client.post(
            "/api/v1/webhooks",
            json={"url": f"https://example.com/{NUL}", "events": ["report.completed"]},
        )
        _assert_nul_refused(hook)


async def test_a_nul_split_across_body_chunks_is_found(app: FastAPI, enterprise: Tenant) -> None:
    encoded = orjson.dumps(system_body(name=f"Roof{NUL}top"))
    at = encoded.index(b"\\u0000") + 3  # between "\u0" and "000"

    async def chunks() -> Any:
        yield encoded[:at]
        yield encoded[at:]

    async with client_for(app, enterprise.live) as client:
        before = await _system_count(client)
        response = await client.post(
            "/api/v1/systems", content=chunks(), headers={"Content-Type": "application/json"}
        )
        _assert_nul_refused(response)
        assert await _system_count(client) == before


async def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        created = await create_system(client, name="C:\\u0000 folder")
        assert created["name"] == "C:\\u0000 folder"


async def test_a_nul_in_a_body_with_an_idempotency_key_leaves_the_key_free(
    app: FastAPI, enterprise: Tenant
) -> None:
    headers = {"Idempotency-Key": "nul-then-clean"}
    async with client_for(app, enterprise.live) as client:
        refused = await client.post(
            "/api/v1/systems", json=system_body(name=f"a{NUL}"), headers=headers
        )
        _assert_nul_refused(refused)
        clean = await client.post("/api/v1/systems", json=system_body(), headers=headers)
        assert clean.status_code == 201, clean.text


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/systems/sys_%00x",
        "/api/v1/systems/sys_%00x/readings",
        "/api/v1/declarations/dcl_%00",
        "/api/v1/declarations?system_id=sys_%00",
        "/api/v1/systems?status=active%00",
        "/api/v1/market-prices?zone=NL&from=2025-05-01T00:00:00Z%00",
        "/api/v1/reports/rpt_x?unused=%00",
    ],
)
async def test_a_nul_in_the_url_is_refused(app: FastAPI, enterprise: Tenant, target: str) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.get(target)
    _assert_nul_refused(response)


async def test_a_nul_in_the_url_comes_after_authentication(app: FastAPI) -> None:
    async with client_for(app) as client:
        response = await client.get("/api/v1/systems/sys_%00x")
    assert_error(response, 401, "unauthorized")


async def test_a_nul_in_a_dashboard_form_or_address_is_a_400_page(
    app: FastAPI, pro: Tenant
) -> None:
    async with browser_for(app) as browser:
        form = await browser.get("/signup")
        email = new_email()
        refused = await browser.post(
            "/signup",
            data={
                "csrf": csrf_of(form),
                "name": f"Nul{NUL}",
                "email": email,
                "password": "correct horse battery",
            },
        )
        assert refused.status_code == 400
        assert refused.headers["content-type"].startswith("text/html")
        assert "NUL" in text_of(refused)
        # No account was made: logging in with it fails.
        assert (await log_in(browser, email, "correct horse battery")).status_code == 400

    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        page = await browser.get("/systems/sys_%00x")
        assert page.status_code == 400
        assert page.headers["content-type"].startswith("text/html")
        assert "NUL" in text_of(page)
        keys = await browser.get("/settings/api")
        assert keys.status_code == 200
        created = await browser.post(
            "/settings/api/keys",
            data={"csrf": csrf_of(keys), "name": f"k{NUL}", "environment": "live"},
        )
        assert created.status_code == 400
        assert "NUL" in text_of(created)


@given(
    st.text(alphabet=st.sampled_from(["\\", "u", "0", "a", '"', NUL, "é"]), max_size=12),
    st.lists(st.integers(min_value=0, max_value=60), max_size=4),
)
def test_the_json_nul_scanner_agrees_with_a_json_parser(text: str, cuts: list[int]) -> None:
    document = orjson.dumps({"value": text})
    points = sorted({min(cut, len(document)) for cut in cuts})
    pieces = [document[a:b] for a, b in zip([0, *points], [*points, len(document)], strict=True)]
    scanner = JsonNulScanner()
    found = any(scanner.feed(piece) for piece in pieces)
    assert found == (NUL in orjson.loads(document)["value"])


def test_url_nul_rule() -> None:
    assert url_has_nul("/a\x00", b"")
    assert url_has_nul("/a", b"x=%00")
    assert not url_has_nul("/a", b"x=%2500")  # the text "%00"
    assert not url_has_nul("/a%00", b"x=100")  # a decoded path holds no escapes


# --- 6. timestamps outside years 1-9999 once in UTC -----------------------------------------

_OUT_OF_RANGE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:45:00-14:00"]


@pytest.mark.parametrize("text", _OUT_OF_RANGE)
def test_the_time_parser_refuses_instants_outside_datetime(text: str) -> None:
    with pytest.raises(TimestampError, match="outside the years 1–9999"):
        parse_timestamp(text)


@pytest.mark.parametrize("text", _OUT_OF_RANGE)
async def test_out_of_range_offsets_are_a_400_everywhere(
    app: FastAPI, enterprise: Tenant, text: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await create_system(client)
        base = f"/api/v1/systems/{system['id']}"
        answers = {
            "readings from": await client.get(f"{base}/readings", params={"from": text}),
            "readings to": await client.get(f"{base}/readings", params={"to": text}),
            "prices": await client.get("/api/v1/market-prices", params={"zone": "NL", "to": text}),
            "value": await client.get(f"{base}/market-value", params={"from": text}),
            "report": await client.post(
                "/api/v1/reports",
                json={
                    "type": "production",
                    "format": "csv",
                    "system_ids": [system["id"]],
                    "from": text,
                    "to": "2025-01-01T00:00:00Z",
                },
            ),
            "upload": await client.post(
                f"{base}/readings", json={"readings": [{"timestamp": text, "energy_wh": 1.0}]}
            ),
        }
        for where, response in answers.items():
            body = assert_error(response, 400, "validation")
            assert "outside the years 1–9999" in body["error"], (where, body)
        stored = await client.get(f"{base}/readings", params={"interval": "1d"})
        assert stored.json()["meta"]["totals"]["samples"] == 0
        reports = await client.get("/api/v1/reports")
        assert reports.json()["data"] == []


# --- 7. time-zone names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "A" * 300,
        "Europe/" + "x" * 60,
        "localtime",
        "posixrules",
        "posix/Europe/Amsterdam",
        "right/UTC",
        "Europe/Nowhere",
        "../../etc/passwd",
        "",
    ],
)
async def test_time_zones_outside_the_tz_database_are_a_400(
    app: FastAPI, enterprise: Tenant, name: str
) -> None:
    location = {"latitude": 52.0, "longitude": 4.0, "timezone": name}
    async with client_for(app, enterprise.live) as client:
        before = await _system_count(client)
        created = await client.post("/api/v1/systems", json=system_body(location=location))
        body = assert_error(created, 400, "validation")
        assert "timezone" in body["error"]
        assert len(body["error"]) < SHORT_MESSAGE
        assert "Retry-After" not in created.headers
        assert await _system_count(client) == before
        system = await create_system(client)
        patched = await client.patch(
            f"/api/v1/systems/{system['id']}", json={"location": {"timezone": name}}
        )
        assert_error(patched, 400, "validation")
        after = await client.get(f"/api/v1/systems/{system['id']}")
        assert after.json()["location"]["timezone"] == "Europe/Amsterdam"


@pytest.mark.parametrize("name", ["US/Eastern", "Etc/GMT+5", "UTC", "Asia/Kolkata"])
async def test_canonical_and_backward_names_are_accepted(
    app: FastAPI, enterprise: Tenant, name: str
) -> None:
    location = {"latitude": 40.0, "longitude": -74.0, "timezone": name}
    async with client_for(app, enterprise.live) as client:
        created = await create_system(client, location=location)
        assert created["location"]["timezone"] == name
        readings = await client.get(
            f"/api/v1/systems/{created['id']}/readings", params={"interval": "1d"}
        )
        assert readings.status_code == 200, readings.text


def test_the_zone_list_is_the_tz_database_not_the_host() -> None:
    names = tz_database_names()
    assert "Europe/Amsterdam" in names
    assert "US/Pacific" in names  # backward
    assert not {"localtime", "posixrules"} & names
    assert not any(name.startswith(("posix/", "right/")) for name in names)
    assert max(len(name) for name in names) <= 64
    with pytest.raises(ValueError, match="at most 64"):
        check_time_zone("x" * 65)


def test_only_network_os_errors_read_as_a_database_outage() -> None:
    long_name = OSError(errno.ENAMETOOLONG, "File name too long")
    missing = FileNotFoundError(errno.ENOENT, "No such file")
    assert not is_database_unavailable(long_name)
    assert not is_database_unavailable(missing)
    assert is_database_unavailable(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert is_database_unavailable(OSError(errno.EHOSTUNREACH, "No route to host"))
    assert is_database_unavailable(socket.gaierror(socket.EAI_NONAME, "Name unknown"))
    assert is_database_unavailable(TimeoutError())
    # A failure to connect, whatever its OS error, arrives wrapped (db.watch_connects).
    assert is_database_unavailable(DatabaseUnreachable("cannot connect: OSError"))


# --- 8. bounded echo ------------------------------------------------------------------------

_LONG = "N" * 65_000


async def test_error_messages_quote_only_a_prefix_of_the_input(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await create_system(client)
        base = f"/api/v1/systems/{system['id']}"
        answers = [
            await client.get(f"{base}/readings", params={"interval": _LONG}),
            await client.get(f"{base}/readings", params={"from": _LONG}),
            await client.get("/api/v1/market-prices", params={"zone": _LONG}),
            await client.get("/api/v1/systems", params={"status": _LONG}),
            await client.get("/api/v1/systems", params={"page": _LONG}),
            await client.get("/api/v1/declarations", params={"type": _LONG}),
            await client.post("/api/v1/systems", json={**system_body(), _LONG: 1}),
            await client.post(
                "/api/v1/systems",
                json=system_body(
                    location={"latitude": 1, "longitude": 1, "timezone": "UTC", "country": _LONG}
                ),
            ),
            await client.post(
                f"{base}/readings", json={"readings": [{"timestamp": _LONG, "energy_wh": 1}]}
            ),
            await client.post(
                f"{base}/readings",
                json={"readings": [{"timestamp": "2025-01-01T00:00:00Z", _LONG: 1}]},
            ),
            await client.post("/api/v1/webhooks", json={"url": _LONG, "events": [_LONG]}),
            await client.get(f"/api/v1/systems/{'s' * 4000}"),
            await client.get(f"/api/v1/{'p' * 4000}"),
        ]
        for response in answers:
            assert response.status_code in (400, 404), response.text[:200]
            assert len(response.json()["error"]) < SHORT_MESSAGE, response.text[:200]
            assert "N" * (QUOTE_LIMIT + 1) not in response.text


def test_excerpt_keeps_a_prefix() -> None:
    assert excerpt("short") == "short"
    assert excerpt("x" * QUOTE_LIMIT) == "x" * QUOTE_LIMIT
    assert excerpt("x" * 1000) == "x" * QUOTE_LIMIT + "…"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("to=", "query parameter 'to' is empty"),
        ("interval=&from=2025-06-01T00:00:00Z", "query parameter 'interval' is empty"),
        ("interval=1h&interval=1d", "query parameter 'interval' is given more than once"),
        ("from=2025-06-01T00:00:00Z&from=2025-06-02T00:00:00Z", "'from' is given more than once"),
    ],
)
async def test_a_parameter_given_twice_or_empty_is_refused(
    app: FastAPI, enterprise: Tenant, query: str, problem: str
) -> None:
    """Not a silent pick: `?to=` from a client whose variable was empty read the last 24 hours
    as if asked, and of two `interval`s the last one won (found by fuzzing)."""
    async with client_for(app, enterprise.live) as client:
        system = await create_system(client)
        response = await client.get(f"/api/v1/systems/{system['id']}/readings?{query}")
        body = assert_error(response, 400, "validation")
        assert problem in body["error"]


async def test_the_rule_holds_for_solved_parameters_and_ignores_unknown_ones(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        twice = await client.get("/api/v1/events?limit=5&limit=6")
        empty = await client.get("/api/v1/systems?page=")
        unknown = await client.get("/api/v1/systems?x=1&x=&limit=5")
        plain = await client.get("/api/v1/events?limit=5")
    assert "'limit' is given more than once" in assert_error(twice, 400, "validation")["error"]
    assert "'page' is empty" in assert_error(empty, 400, "validation")["error"]
    assert unknown.status_code == 200, unknown.text
    assert unknown.json()["pagination"]["limit"] == 5
    assert plain.status_code == 200


async def test_the_gateway_knows_each_operations_query_parameters_as_documented(
    app: FastAPI,
) -> None:
    async with client_for(app) as client:
        document = (await client.get("/api/v1/openapi.json")).json()
    table = app.state.route_table
    checked = 0
    for path, operations in document["paths"].items():
        concrete = path.replace("{", "").replace("}", "")  # e.g. /systems/system_id
        for method, operation in operations.items():
            documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            found = table.match(concrete, method.upper())
            assert found.template == path, (method, path)
            assert found.query == documented, (method, path)
            checked += bool(documented)
    assert checked >= 9
