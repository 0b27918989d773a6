"""`/portfolio/readings` against the per-system endpoint on a randomised fleet: many systems
in many zones (whole-hour, half-hour and 45-minute offsets, both hemispheres' summer time),
random readings with gaps, missing powers and odd values, over windows that hold DST days;
every bucket and total must be equal, on every page. Both databases.

The portfolio sums all the systems' rows in one vectorised pass (`kit.grid.aggregate_many`),
the per-system endpoint one system at a time (`aggregate_into`): this is what shows they agree.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

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


@pytest.mark.slow
async def test_random_fleet_equals_the_per_system_endpoint(
    app: FastAPI, enterprise: Tenant
) -> None:
    rng = random.Random(SEED)
    async with client_for(app, enterprise.live) as client:
        ids: list[str] = []
        for i in range(14):
            timezone = ZONES[i % len(ZONES)]
            body = {"name": f"R{i}", "capacity_kwp": 1000.0,
                    "location": {"latitude": -30.0 if "Australia" in timezone else 50.0,
                                 "longitude": 5.0, "timezone": timezone}}  # fmt: skip
            system_id = (await create_system(client, **body))["id"]
            ids.append(system_id)
            if i % 7 == 6:
                continue  # a system without readings
            first = datetime(2025, 9, 25, tzinfo=UTC) + timedelta(hours=rng.randrange(0, 48))
            readings = _readings(rng, first, 40)
            for lo in range(0, len(readings), 3000):
                response = await upload(client, system_id, readings[lo : lo + 3000])
                assert response.status_code == 200, response.text
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
