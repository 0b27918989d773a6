"""`GET /systems/{id}/summary` and the service API other areas build on (`quarter_hours`,
`aggregate`, `period_totals`), on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from fastapi import FastAPI

from solarapi.kit.grid import Interval
from solarapi.models.systems import System
from solarapi.readings.service import aggregate, period_totals, quarter_hours
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, quarter_series, upload


def _floor_quarter(moment: datetime) -> datetime:
    return moment - timedelta(
        minutes=moment.minute % 15, seconds=moment.second, microseconds=moment.microsecond
    )


async def test_summary_on_the_local_calendar(app: FastAPI, enterprise: Tenant) -> None:
    tz = ZoneInfo("Pacific/Auckland")
    now = datetime.now(UTC)
    local_today = now.astimezone(tz).date()
    today_start = datetime(local_today.year, local_today.month, local_today.day, tzinfo=tz)
    last = _floor_quarter(now) - timedelta(minutes=15)
    async with client_for(app, enterprise.live) as client:
        system = await create_system(
            client,
            location={"latitude": -36.8, "longitude": 174.7, "timezone": "Pacific/Auckland"},
            market_zone=None,
        )
        empty = (await client.get(f"/api/v1/systems/{system['id']}/summary")).json()
        readings = [
            # Two years ago: lifetime only.
            {"timestamp": iso(today_start - timedelta(days=800)), "energy_wh": 1000.0},
            # The latest quarter-hour that has ended: today (unless today is a minute old).
            {"timestamp": iso(last), "energy_wh": 3.0, "power_w": 12.5},
        ]
        assert (await upload(client, system["id"], readings)).status_code == 200
        body = (await client.get(f"/api/v1/systems/{system['id']}/summary")).json()
    assert empty == {
        "energy_today_wh": None,
        "energy_month_wh": None,
        "energy_year_wh": None,
        "energy_lifetime_wh": None,
        "last_power_w": None,
        "last_reading_at": None,
    }
    assert body["energy_lifetime_wh"] == 1003.0
    assert body["last_power_w"] == 12.5
    assert body["last_reading_at"] == iso(last)
    if last >= today_start:
        assert body["energy_today_wh"] == 3.0
        assert body["energy_month_wh"] == 3.0
        assert body["energy_year_wh"] == 3.0


async def _system_row(app: FastAPI, system_id: str) -> System:
    async with app.state.sessionmaker() as session:
        system = await session.get(System, system_id)
        assert system is not None
        return system


async def test_quarter_hours_marks_gaps_and_never_the_future(
    app: FastAPI, enterprise: Tenant
) -> None:
    start = datetime(2025, 6, 15, 10, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        items = quarter_series(start, 4, 50.0, 200.0)
        del items[1]
        items[0].pop("power_w")
        await upload(client, system_id, items)
    system = await _system_row(app, system_id)
    async with app.state.sessionmaker() as session:
        series = await quarter_hours(
            session, system, start, start + timedelta(hours=2), now=start + timedelta(hours=3)
        )
        # `now` inside the range: nothing from the quarter-hour that has not ended.
        cut = await quarter_hours(
            session,
            system,
            start,
            start + timedelta(hours=1),
            now=start + timedelta(minutes=44),
        )
    assert series.starts.tolist() == [
        int((start + timedelta(minutes=15 * i)).timestamp()) for i in range(8)
    ]
    assert series.energy_wh[:4].tolist()[0] == 50.0
    assert np.isnan(series.energy_wh[1])
    assert series.energy_wh[2:4].tolist() == [50.0, 50.0]
    assert np.isnan(series.energy_wh[4:]).all()
    assert np.isnan(series.power_w[0])
    assert series.power_w[2] == 200.0
    assert len(cut.starts) == 4
    assert np.isnan(cut.energy_wh[2:]).all()
    assert cut.energy_wh[0] == 50.0


async def test_quarter_hours_rejects_unaligned_ranges(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
    system = await _system_row(app, system_id)
    start = datetime(2025, 6, 15, 10, 5, tzinfo=UTC)
    async with app.state.sessionmaker() as session:
        with pytest.raises(ValueError, match="aligned"):
            await quarter_hours(session, system, start, start + timedelta(hours=1), start)


async def test_aggregate_and_period_totals_match_the_endpoint(
    app: FastAPI, enterprise: Tenant
) -> None:
    start = datetime(2025, 6, 1, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        items = quarter_series(start, 96 * 3, 7.25)
        del items[100:110]
        await upload(client, system_id, items)
        endpoint = (
            await client.get(
                f"/api/v1/systems/{system_id}/readings",
                params={"from": iso(start), "to": iso(start + timedelta(days=3)), "interval": "1d"},
            )
        ).json()
    system = await _system_row(app, system_id)
    now = datetime.now(UTC)
    async with app.state.sessionmaker() as session:
        body = await aggregate(session, system, start, start + timedelta(days=3), Interval.DAY, now)
        totals = await period_totals(
            session, system, int(start.timestamp()), int(start.timestamp()) + 3 * 86400, now
        )
    assert body == endpoint
    assert totals.samples == 96 * 3 - 10
    assert totals.expected_samples == 96 * 3
    assert totals.energy_wh == 7.25 * (96 * 3 - 10)
