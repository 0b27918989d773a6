"""An upload racing a change of the system it writes under (issue 28, item 3): the rollups
and the plausibility check must follow the system as it is under the lock, never as it was
read before. Both databases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from solarapi.errors import ValidationFailed
from solarapi.kit.timefmt import utcnow
from solarapi.readings.upload import batch_from_json, upload_readings
from solarapi.systems import repository as systems
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, quarter_series, upload

# Two local days of Amsterdam and of Sydney overlap only in part: a day rolled up with the
# wrong zone shows at once as a 1d bucket that differs from the sum of its quarter-hours.
START = datetime(2025, 6, 10, tzinfo=UTC)
HOURS = 48


async def _days_match_quarter_hours(client: httpx.AsyncClient, system_id: str) -> list[str]:
    """The 1d buckets whose energy is not the sum of their 15m buckets (empty: all exact)."""
    params = {"from": iso(START), "to": iso(START + timedelta(hours=HOURS))}
    days = await client.get(
        f"/api/v1/systems/{system_id}/readings", params={**params, "interval": "1d"}
    )
    assert days.status_code == 200, days.text
    meta = days.json()["meta"]
    fine = await client.get(
        f"/api/v1/systems/{system_id}/readings",
        params={"from": meta["from"], "to": meta["to"], "interval": "15m"},
    )
    assert fine.status_code == 200, fine.text
    quarters = fine.json()["data"]
    wrong: list[str] = []
    for day in days.json()["data"]:
        inside = [q for q in quarters if day["start"] <= q["start"] < day["end"]]
        total = sum(q["energy_wh"] or 0.0 for q in inside)
        samples = sum(q["samples"] for q in inside)
        if samples != day["samples"] or round(total, 3) != (day["energy_wh"] or 0.0):
            wrong.append(f"{day['start']}: 1d {day['energy_wh']} ({day['samples']}) vs 15m {total}")
    return wrong


async def test_upload_after_timezone_change_rolls_up_in_the_new_zone(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The interleaving that corrupted the rollups, made deterministic: the upload reads the
    system (Amsterdam), the PATCH to Sydney commits and rebuilds the days, then the upload
    takes the lock and writes. Its days must be Sydney days."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        async with app.state.sessionmaker() as session:
            stale = await systems.get(session, system_id)
            assert stale is not None
            assert stale.timezone == "Europe/Amsterdam"
            await session.commit()  # ends the read; the object stays as read
            patched = await client.patch(
                f"/api/v1/systems/{system_id}",
                json={"location": {"timezone": "Australia/Sydney"}},
            )
            assert patched.status_code == 200, patched.text
            batch = batch_from_json({"readings": quarter_series(START, HOURS * 4, 10.0)})
            await upload_readings(session, stale, batch, utcnow())
            await session.commit()
        assert await _days_match_quarter_hours(client, system_id) == []


async def test_upload_is_checked_against_the_capacity_under_the_lock(
    app: FastAPI, enterprise: Tenant
) -> None:
    """Read at 8.4 kWp (3,150 Wh per quarter-hour allowed), the capacity PATCHed to 1 kWp
    (375 Wh) before the lock: 1,000 Wh is refused and nothing is stored."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        async with app.state.sessionmaker() as session:
            stale = await systems.get(session, system_id)
            assert stale is not None
            await session.commit()
            patched = await client.patch(f"/api/v1/systems/{system_id}", json={"capacity_kwp": 1})
            assert patched.status_code == 200, patched.text
            batch = batch_from_json({"readings": quarter_series(START, 4, 1000.0)})
            with pytest.raises(ValidationFailed, match=r"implausible for a 1\.0 kWp system"):
                await upload_readings(session, stale, batch, utcnow())
            await session.rollback()
        body = (await client.get(f"/api/v1/systems/{system_id}")).json()
    assert body["first_reading_at"] is None


async def _trial(client: httpx.AsyncClient, yields: int) -> list[str]:
    system_id = (await create_system(client))["id"]

    async def patch() -> httpx.Response:
        for _ in range(yields):  # starts the PATCH at a different step of the upload
            await asyncio.sleep(0)
        return await client.patch(
            f"/api/v1/systems/{system_id}", json={"location": {"timezone": "Australia/Sydney"}}
        )

    uploaded, patched = await asyncio.gather(
        upload(client, system_id, quarter_series(START, HOURS * 4, 10.0)), patch()
    )
    assert uploaded.status_code == 200, uploaded.text
    assert patched.status_code == 200, patched.text
    return await _days_match_quarter_hours(client, system_id)


async def test_upload_racing_timezone_patch_many_times(app: FastAPI, enterprise: Tenant) -> None:
    """The race itself, over HTTP, 24 times with the PATCH started at different moments of
    the upload: every 1d bucket equals the sum of its quarter-hours afterwards."""
    failures: dict[int, Any] = {}
    async with client_for(app, enterprise.live) as client:
        for trial in range(24):
            wrong = await _trial(client, yields=trial % 12)
            if wrong:
                failures[trial] = wrong
    assert failures == {}, f"{len(failures)} of 24 trials left a wrong day: {failures}"
