"""`/portfolio/readings`, `/portfolio/summary` and `/portfolio/market-value` against the
per-system endpoints on a randomised fleet: many systems in many time zones (whole-hour,
half-hour and 45-minute offsets, both hemispheres' summer time), some in market zones with
imported prices (gaps, negative prices) and some without, random readings with gaps, missing
powers and odd values, over windows that hold DST days; every bucket and total must be
equal, on every page, and the zones' totals those of their systems. Both databases.

The portfolio reads every system's rows in one statement per source and sums them in one
vectorised pass (`kit.grid.aggregate_many`) or values each system from the shared read
(`prices.market_value.valued_buckets`), the per-system endpoint one system at a time: this
is what shows they agree.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.prices.helpers import import_file, write_csv
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, upload

ZONES = [
    "Europe/Amsterdam",  # summer time ends 2025-10-26 (a 25-hour day)
    "America/New_York",  # ends 2025-11-02
    "Australia/Sydney",  # begins 2025-10-05 (a 23-hour day)
    "Asia/Kolkata",  # +05:30: local days and hours off the UTC hour
    "Pacific/Chatham",  # +13:45 / +12:45, summer time begins 2025-09-28
    "UTC",
]
# Windows with DST days of several of the zones inside.
WINDOWS = [
    ("2025-09-24T07:00:00Z", "2025-11-05T00:00:00Z", ("1d", "1w", "1M")),
    ("2025-10-25T10:00:00Z", "2025-10-27T13:00:00Z", ("15m", "30m", "1h", "1d")),
    ("2025-10-04T00:00:00Z", "2025-10-06T00:00:00Z", ("1h", "1d")),
]
SEED = 29


def _readings(rng: random.Random, start: datetime, days: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for quarter in range(days * 96):
        if rng.random() < 0.15:
            continue  # a gap
        item: dict[str, Any] = {
            "timestamp": iso(start + timedelta(minutes=15 * quarter)),
            # Values whose sums are not exact in binary (0.1 steps), and some larger ones.
            "energy_wh": round(rng.choice([rng.uniform(0, 900), rng.random(), 0.1]), 3),
        }
        if rng.random() < 0.7:
            item["power_w"] = round(rng.uniform(0, 3500), 2)
        items.append(item)
    return items


async def _get(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/api/v1{path}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# Market zones of the systems, in turn (None: no zone; "DK2": a zone without prices). Prices
# are shared by every account of a database, and a worker's tests share one: these are zones
# no other test stores prices for.
MARKET_ZONES = ["DK1", None, "NO1", "DK1", "DK2", "NO1", None]


async def _prices(app: FastAPI, rng: random.Random, tmp_path: Path) -> None:
    """Prices of DK1 and NO1 over the windows, with gaps and negative hours."""
    first = datetime(2025, 9, 20, tzinfo=UTC)
    for zone in ("DK1", "NO1"):
        rows = []
        for quarter in range(50 * 96):
            if rng.random() < 0.05:
                continue  # no price
            price = round(rng.uniform(-40.0, 160.0), 2)
            rows.append(((first + timedelta(minutes=15 * quarter)).isoformat(), price))
        await import_file(app, write_csv(tmp_path, f"{zone}.csv", rows), zone, 900)


async def _random_fleet(
    app: FastAPI, client: httpx.AsyncClient, rng: random.Random, tmp_path: Path
) -> list[str]:
    await _prices(app, rng, tmp_path)
    ids: list[str] = []
    for i in range(14):
        timezone = ZONES[i % len(ZONES)]
        body = {"name": f"R{i}", "capacity_kwp": 1000.0 + i,
                "location": {"latitude": -30.0 if "Australia" in timezone else 50.0,
                             "longitude": 5.0, "timezone": timezone},
                "market_zone": MARKET_ZONES[i % len(MARKET_ZONES)]}  # fmt: skip
        system_id = (await create_system(client, **body))["id"]
        ids.append(system_id)
        if i % 7 == 6:
            continue  # a system without readings
        first = datetime(2025, 9, 25, tzinfo=UTC) + timedelta(hours=rng.randrange(0, 48))
        readings = _readings(rng, first, 40)
        for lo in range(0, len(readings), 3000):
            response = await upload(client, system_id, readings[lo : lo + 3000])
            assert response.status_code == 200, response.text
    return ids


async def _pages(
    client: httpx.AsyncClient, path: str, limit: int, **params: Any
) -> list[dict[str, Any]]:
    """Every page of a portfolio answer, each page's `meta` checked equal to the first's."""
    pages = []
    while True:
        body = await _get(client, path, limit=limit, page=len(pages) + 1, **params)
        if pages:
            assert body["meta"] == pages[0]["meta"]
        pages.append(body)
        if not body["pagination"]["has_more"]:
            return pages


@pytest.mark.slow
async def test_random_fleet_equals_the_per_system_endpoint(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    async with client_for(app, enterprise.live) as client:
        ids = await _random_fleet(app, client, rng, tmp_path)
        for start, end, intervals in WINDOWS:
            for interval in intervals:
                window = {"from": start, "to": end, "interval": interval}
                singles = {
                    system_id: await _get(client, f"/systems/{system_id}/readings", **window)
                    for system_id in ids
                }
                limit = rng.choice([3, 5, 14])
                seen: list[str] = []
                page = 1
                while True:
                    fleet = await _get(
                        client, "/portfolio/readings", limit=limit, page=page, **window
                    )
                    for item in fleet["data"]:
                        single = singles[item["system_id"]]
                        where = (item["system_id"], interval, start)
                        assert item["data"] == single["data"], where
                        assert item["totals"] == single["meta"]["totals"], where
                        assert (item["from"], item["to"]) == (
                            single["meta"]["from"],
                            single["meta"]["to"],
                        ), where
                        seen.append(item["system_id"])
                    totals = fleet["meta"]["totals"]
                    energies = [
                        s["meta"]["totals"]["energy_wh"]
                        for s in singles.values()
                        if s["meta"]["totals"]["energy_wh"] is not None
                    ]
                    assert totals["energy_wh"] == round(sum(energies), 3)
                    assert totals["samples"] == sum(
                        s["meta"]["totals"]["samples"] for s in singles.values()
                    )
                    if not fleet["pagination"]["has_more"]:
                        break
                    page += 1
                assert seen == ids


@pytest.mark.slow
async def test_random_fleet_summary_equals_the_per_system_endpoint(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    rng = random.Random(SEED + 1)
    async with client_for(app, enterprise.live) as client:
        ids = await _random_fleet(app, client, rng, tmp_path)
        singles = {i: await _get(client, f"/systems/{i}/summary") for i in ids}
        for limit in (3, 14):
            pages = await _pages(client, "/portfolio/summary", limit)
            items = [item for page in pages for item in page["data"]]
            assert [item["system_id"] for item in items] == ids
            for item in items:
                assert item == {"system_id": item["system_id"], **singles[item["system_id"]]}
            totals = pages[0]["meta"]["totals"]
            lifetimes = [s["energy_lifetime_wh"] for s in singles.values()]
            assert totals["energy_lifetime_wh"] == round(
                sum(v for v in lifetimes if v is not None), 3
            )
            assert totals["systems"] == len(ids)
            assert totals["capacity_kwp"] == round(sum(1000.0 + i for i in range(14)), 3)
        # A filtered part: the systems of one market zone.
        dk1 = [i for n, i in enumerate(ids) if MARKET_ZONES[n % len(MARKET_ZONES)] == "DK1"]
        only = await _get(client, "/portfolio/summary", market_zone="DK1")
        assert [item["system_id"] for item in only["data"]] == dk1
        assert only["meta"]["totals"]["systems"] == len(dk1)


@pytest.mark.slow
async def test_random_fleet_market_value_equals_the_per_system_endpoint(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    rng = random.Random(SEED + 2)
    async with client_for(app, enterprise.live) as client:
        ids = await _random_fleet(app, client, rng, tmp_path)
        zone_of = {i: MARKET_ZONES[n % len(MARKET_ZONES)] for n, i in enumerate(ids)}
        zoneless = next(i for i in ids if zone_of[i] is None)
        response = await client.get(f"/api/v1/systems/{zoneless}/market-value")
        assert response.status_code == 409, response.text
        for start, end, intervals in WINDOWS:
            for interval in intervals:
                window = {"from": start, "to": end, "interval": interval}
                # (Only the requests needed: the key's rate limit is 300 a minute.)
                singles = {
                    system_id: await _get(client, f"/systems/{system_id}/market-value", **window)
                    for system_id in ids
                    if zone_of[system_id] is not None
                }
                readings = {
                    system_id: await _get(client, f"/systems/{system_id}/readings", **window)
                    for system_id in ids
                    if zone_of[system_id] is None
                }
                pages = await _pages(
                    client, "/portfolio/market-value", rng.choice([3, 5, 14]), **window
                )
                items = [item for page in pages for item in page["data"]]
                assert [item["system_id"] for item in items] == ids
                for item in items:
                    system_id = item["system_id"]
                    where = (system_id, interval, start)
                    assert item["market_zone"] == zone_of[system_id], where
                    if system_id not in singles:
                        # No zone: null values and no buckets, over its own widened range.
                        single_range = readings[system_id]["meta"]
                        assert item["data"] == [], where
                        assert set(item["totals"].values()) == {None}, where
                        assert (item["from"], item["to"]) == (
                            single_range["from"],
                            single_range["to"],
                        ), where
                        continue
                    single = singles[system_id]
                    assert item["data"] == single["data"], where
                    assert item["totals"] == single["meta"]["totals"], where
                    for key in ("timezone", "from", "to", "currency", "source"):
                        assert item[key] == single["meta"][key], (key, *where)
                meta = pages[0]["meta"]
                zones = {zone["zone"]: zone for zone in meta["zones"]}
                # DK2 has no prices: its systems are valued (no value) and counted.
                assert set(zones) == {"DK1", "NO1", "DK2"}
                for code, zone in zones.items():
                    members = [singles[i]["meta"]["totals"] for i in ids if zone_of[i] == code]
                    assert zone["systems"] == len(members)
                    for key in ("energy_wh", "priced_energy_wh", "negative_price_energy_wh"):
                        assert zone[key] == pytest.approx(
                            sum(t[key] or 0.0 for t in members), rel=1e-9, abs=1e-3
                        ), (code, key)
                    for key in ("value_eur", "negative_price_value_eur"):
                        assert zone[key] == pytest.approx(
                            sum(t[key] or 0.0 for t in members), rel=1e-9, abs=1e-3
                        ) or (zone[key] is None and all(t[key] is None for t in members))
                assert zones["DK2"]["value_eur"] is None
                assert meta["totals"]["systems"] == len(singles)
                assert meta["totals"]["baseload_price_eur_per_mwh"] is None  # zones mixed
