"""The 10,000-bucket cap on the grid of the system's own zone: a range over it is refused
naming the largest `to` that fits that grid, and that `to` is then answered — in zones off
the UTC hour too (Kolkata, Kathmandu, St John's, Lord Howe, Chatham), where every `30m` or
`1h` edge moves and the UTC grid's count is one bucket off. Per system (readings, market
value) and for a fleet (the smallest of its zones' largest `to`); both databases."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support import Tenant, client_for
from tests.systems.factories import create_system

ZONES = [
    "UTC",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "America/St_Johns",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
]
# ~17 months: over 10,000 buckets of 30m and of 1h on every grid.
TOO_LONG = {"from": "2024-01-01T00:00:00Z", "to": "2025-06-01T00:00:00Z"}
_LARGEST = re.compile(r"for from=(\S+) the largest allowed 'to' is (\S+) ")


def _largest_to(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "validation"
    found = _LARGEST.search(body["error"])
    assert found is not None, body["error"]
    return found.group(2)


def _one_second_later(timestamp: str) -> str:
    later = datetime.fromisoformat(timestamp) + timedelta(seconds=1)
    return later.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _system(client: httpx.AsyncClient, timezone: str) -> str:
    body: dict[str, Any] = {
        "location": {"latitude": 10.0, "longitude": 5.0, "timezone": timezone},
        "market_zone": "NL",
    }
    return str((await create_system(client, **body))["id"])


@pytest.mark.parametrize("interval", ["30m", "1h"])
async def test_the_largest_to_named_is_the_systems_own_and_is_answered(
    app: FastAPI, enterprise: Tenant, interval: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        for timezone in ZONES:
            system_id = await _system(client, timezone)
            for endpoint in ("readings", "market-value"):
                path = f"/api/v1/systems/{system_id}/{endpoint}"
                params = {**TOO_LONG, "interval": interval}
                largest = _largest_to(await client.get(path, params=params))
                fits = await client.get(path, params={**params, "to": largest})
                assert fits.status_code == 200, (timezone, endpoint, fits.text)
                assert len(fits.json()["data"]) == 10_000, (timezone, endpoint)
                over = await client.get(path, params={**params, "to": _one_second_later(largest)})
                assert _largest_to(over) == largest, (timezone, endpoint)


async def test_a_range_within_the_cap_of_its_own_grid_is_not_refused_on_the_utc_grid(
    app: FastAPI, enterprise: Tenant
) -> None:
    """10,000 of Kathmandu's hours (each starts at :15 UTC) are 10,001 UTC hours: answered."""
    params = {"from": "2024-01-01T00:15:00Z", "to": "2025-02-20T16:15:00Z", "interval": "1h"}
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Asia/Kathmandu")
        utc_id = await _system(client, "UTC")
        for endpoint in ("readings", "market-value"):
            kathmandu = await client.get(f"/api/v1/systems/{system_id}/{endpoint}", params=params)
            assert kathmandu.status_code == 200, kathmandu.text
            assert len(kathmandu.json()["data"]) == 10_000
            utc = await client.get(f"/api/v1/systems/{utc_id}/{endpoint}", params=params)
            assert _largest_to(utc) == "2025-02-20T16:00:00Z"


async def test_an_unknown_system_is_refused_on_the_utc_grid_first(
    app: FastAPI, enterprise: Tenant
) -> None:
    """400 before 404: a system that is not the caller's has no grid to tell, so a range over
    the cap of the UTC grid is the 400 (and one within it the 404)."""
    async with client_for(app, enterprise.live) as client:
        for endpoint in ("readings", "market-value"):
            path = f"/api/v1/systems/sys_missing/{endpoint}"
            params = {**TOO_LONG, "interval": "1h"}
            assert _largest_to(await client.get(path, params=params)) == "2025-02-20T16:00:00Z"
            within = await client.get(path, params={**params, "to": "2024-01-02T00:00:00Z"})
            assert within.status_code == 404, within.text


@pytest.mark.parametrize("endpoint", ["readings", "market-value"])
async def test_a_fleet_is_refused_naming_a_to_that_fits_every_zone(
    app: FastAPI, enterprise: Tenant, endpoint: str
) -> None:
    path = f"/api/v1/portfolio/{endpoint}"
    async with client_for(app, enterprise.live) as client:
        ids = [await _system(client, timezone) for timezone in ZONES]
        params = {**TOO_LONG, "interval": "1h"}
        largest = _largest_to(await client.get(path, params=params))
        fits = await client.get(path, params={**params, "to": largest})
        assert fits.status_code == 200, fits.text
        counts = [len(system["data"]) for system in fits.json()["data"]]
        assert len(counts) == len(ZONES)
        assert max(counts) == 10_000  # the tightest zone's: no `to` later fits them all
        over = await client.get(path, params={**params, "to": _one_second_later(largest)})
        assert over.status_code == 400, over.text
        # One system alone: its own largest `to`, as its per-system endpoint names it.
        for system_id in ids:
            alone = await client.get(path, params={**params, "system_ids": system_id})
            one = await client.get(f"/api/v1/systems/{system_id}/{endpoint}", params=params)
            assert _largest_to(alone) == _largest_to(one)
        # No system of the caller's to tell: the UTC grid's refusal (400 before 404).
        unknown = await client.get(path, params={**params, "system_ids": "sys_missing"})
        assert _largest_to(unknown) == "2025-02-20T16:00:00Z"


async def test_a_range_over_the_cap_is_400_before_a_system_without_a_zone_is_409(
    app: FastAPI, enterprise: Tenant
) -> None:
    """400 before 409 on `/market-value`: a range over the cap of the system's own grid is
    refused before its missing market zone is."""
    async with client_for(app, enterprise.live) as client:
        body: dict[str, Any] = {
            "location": {"latitude": 10.0, "longitude": 5.0, "timezone": "Asia/Kathmandu"},
            "market_zone": None,
        }
        system_id = str((await create_system(client, **body))["id"])
        path = f"/api/v1/systems/{system_id}/market-value"
        params = {**TOO_LONG, "interval": "1h"}
        largest = _largest_to(await client.get(path, params=params))
        readings = await client.get(f"/api/v1/systems/{system_id}/readings", params=params)
        assert largest == _largest_to(readings)  # the system's own grid's
        within = await client.get(path, params={**params, "to": largest})
        assert within.status_code == 409, within.text


async def test_local_days_over_a_day_that_never_existed(app: FastAPI, enterprise: Tenant) -> None:
    """Pacific/Apia skipped 2011-12-30: 10,000 of its local days span 10,001 calendar days.
    The refusal of a longer `1d` range names that `to`, and readings, performance and the
    portfolio answer it with 10,000 buckets (they refused it naming the same `to` again)."""
    too_long = {"interval": "1d", "from": "1999-01-01T00:00:00Z", "to": "2199-01-01T00:00:00Z"}
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Pacific/Apia")
        for path in (f"/systems/{system_id}/readings", f"/systems/{system_id}/performance"):
            refused = await client.get(f"/api/v1{path}", params=too_long)
            largest = _largest_to(refused)
            fits = await client.get(f"/api/v1{path}", params={**too_long, "to": largest})
            assert fits.status_code == 200, (path, fits.text)
            assert len(fits.json()["data"]) == 10_000, path
        portfolio = await client.get("/api/v1/portfolio/readings", params=too_long)
        largest = _largest_to(portfolio)
        fits = await client.get("/api/v1/portfolio/readings", params={**too_long, "to": largest})
        assert fits.status_code == 200, fits.text
        assert [len(item["data"]) for item in fits.json()["data"]] == [10_000]
