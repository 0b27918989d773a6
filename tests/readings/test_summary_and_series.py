"""`GET /systems/{id}/summary` and the service API other areas build on (`quarter_hours`,
`aggregate`, `period_totals`), on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from solarapi.kit.grid import Interval
from solarapi.models.systems import System
from solarapi.readings import repository
from solarapi.readings.repository import reading_store
from solarapi.readings.service import aggregate, period_totals, quarter_hours
from solarapi.readings.store import DAYS, HOURS, RAW, in_time_order
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
            {"timestamp": iso(last), "energy_wh": 3.0, "power_w": 12.34567},
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
    assert body["last_power_w"] == 12.346  # rounded to 3 decimals, as readings are
    assert body["last_reading_at"] == iso(last)
    if last >= today_start:
        assert body["energy_today_wh"] == 3.0
        assert body["energy_month_wh"] == 3.0
        assert body["energy_year_wh"] == 3.0


async def test_simulated_summary_rounds_the_last_power(app: FastAPI, enterprise: Tenant) -> None:
    """The sandbox's last power is the model's, rounded to 3 decimals as every number of a
    readings body is, and equal to the last quarter-hour's `power_max_w` there."""
    now = datetime.now(UTC)
    # On the equator where it is solar noon now: the model's power is far from 0.
    longitude = ((12.0 - now.hour - now.minute / 60.0) * 15.0 + 180.0) % 360.0 - 180.0
    async with client_for(app, enterprise.test) as client:
        system = await create_system(
            client, location={"latitude": 0.0, "longitude": longitude, "timezone": "UTC"}
        )
        body = (await client.get(f"/api/v1/systems/{system['id']}/summary")).json()
        assert body["last_reading_at"] is not None
        start = datetime.fromisoformat(body["last_reading_at"].replace("Z", "+00:00"))
        params = {"from": iso(start), "to": iso(start + timedelta(minutes=15)), "interval": "15m"}
        series = await client.get(f"/api/v1/systems/{system['id']}/readings", params=params)
    [bucket] = series.json()["data"]
    assert body["last_power_w"] > 100.0  # midday: the rounding below is not of a 0
    assert body["last_power_w"] == bucket["power_max_w"]
    assert body["last_power_w"] == round(body["last_power_w"], 3)


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
    assert np.isnan(series.power_max_w[0])
    assert series.power_max_w[2] == 200.0
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
        readings = await aggregate(
            session, system, start, start + timedelta(days=3), Interval.DAY, now
        )
        totals = await period_totals(
            session, system, int(start.timestamp()), int(start.timestamp()) + 3 * 86400, now
        )
    assert readings.to_api() == endpoint
    assert readings.totals.samples == totals.samples == 96 * 3 - 10
    # The UTC range widened to Amsterdam's calendar: four local days.
    assert readings.totals.expected_samples == 96 * 4
    assert totals.expected_samples == 96 * 3
    assert totals.energy_wh == 7.25 * (96 * 3 - 10)


async def test_range_reads_are_exact_and_in_time_order(app: FastAPI, enterprise: Tenant) -> None:
    """The column-wise reads (binary on PostgreSQL) return every stored double bit for bit,
    in time order whatever the upload order, with unreported power as NaN — for the raw
    quarter-hours and for both rollups."""
    start = datetime(2025, 6, 15, tzinfo=UTC)
    count = 96 * 2
    # Values that need all 17 significant digits: a text round trip at 15 would change them.
    energies = [(i + 1) / 3.0 + 1e-9 * i for i in range(count)]
    powers = [None if i % 4 == 0 else (i + 1) / 7.0 for i in range(count)]
    items = []
    for i in range(count):
        item: dict[str, object] = {
            "timestamp": iso(start + timedelta(minutes=15 * i)),
            "energy_wh": energies[i],
        }
        if powers[i] is not None:
            item["power_w"] = powers[i]
        items.append(item)
    order = np.random.default_rng(7).permutation(count)
    async with client_for(app, enterprise.live) as client:
        system_id = (
            await create_system(
                client,
                location={"latitude": 52.0, "longitude": 5.0, "timezone": "UTC", "country": "NL"},
            )
        )["id"]
        # Out of order, in two batches, so the rows are not stored in time order either.
        for half in (order[: count // 2], order[count // 2 :]):
            response = await upload(client, system_id, [items[int(i)] for i in half])
            assert response.status_code == 200, response.text
    system = await _system_row(app, system_id)
    end = start + timedelta(minutes=15 * count)
    async with app.state.sessionmaker() as session:
        series = await quarter_hours(session, system, start, end, now=end + timedelta(hours=1))
        hours = await reading_store(session).rows(
            session, HOURS, system_id, int(start.timestamp()), int(end.timestamp())
        )
        days = await repository.days_between(
            session, system_id, int(start.timestamp()), int(end.timestamp())
        )
        raw = await repository.readings_between(
            session, system_id, int(start.timestamp()), int(end.timestamp())
        )
        energy_only = await repository.energy_between(
            session, system_id, int(start.timestamp()), int(end.timestamp())
        )
    assert series.energy_wh.tolist() == energies
    # The alert rules' read: the raw readings' starts and energy, without their power.
    assert energy_only.starts.tolist() == raw.starts.tolist()
    assert energy_only.starts.dtype == np.int64
    assert energy_only.energy_wh.tolist() == raw.energy_wh.tolist() == energies
    assert energy_only.samples.tolist() == [1] * count
    assert np.isnan(energy_only.power_max_w).all()
    assert [None if np.isnan(p) else p for p in series.power_max_w.tolist()] == powers
    hour_starts = [int(start.timestamp()) + 3600 * h for h in range(count // 4)]
    assert hours.starts.tolist() == hour_starts
    assert hours.samples.tolist() == [4] * (count // 4)
    # Each hour's maximum is its last quarter-hour's power (they grow; the first is unreported).
    assert hours.power_max_w.tolist() == [powers[4 * h + 3] for h in range(count // 4)]
    assert np.allclose(
        hours.energy_wh, [sum(energies[4 * h : 4 * h + 4]) for h in range(count // 4)]
    )
    assert days.starts.tolist() == [int(start.timestamp()), int(start.timestamp()) + 86400]
    assert days.samples.dtype == np.int64
    assert days.samples.tolist() == [96, 96]
    assert days.power_max_w.tolist() == [powers[95], powers[191]]
    # The system's head and its hours in one read (PostgreSQL: one statement) give exactly
    # what the two reads give; a missing system gives no rows (and no head).
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        found, together = await store.system_and_rows(
            session, HOURS, system_id, int(start.timestamp()), int(end.timestamp())
        )
        missing, nothing = await store.system_and_rows(
            session, HOURS, "sys_missing", int(start.timestamp()), int(end.timestamp())
        )
        head = await store.system_head(session, system_id)
        no_head = await store.system_head(session, "sys_missing")
    assert found is not None
    assert found == head
    assert no_head is None
    assert found._fields == ("id", "account_id", "environment", "timezone", "data_source")
    assert {name: getattr(found, name) for name in found._fields} == {
        name: getattr(system, name) for name in found._fields
    }
    assert all(type(value) is str for value in found)
    for name in ("starts", "energy_wh", "samples", "power_max_w"):
        assert np.array_equal(getattr(together, name), getattr(hours, name), equal_nan=True)
        assert getattr(together, name).dtype == getattr(hours, name).dtype
    assert missing is None
    assert len(nothing.starts) == 0
    # Each series, a range without rows (the head alone), and on SQLite a stale chunk (its
    # rows then from the rollup's table): what `system_head` and `rows` give.
    start_s, end_s = int(start.timestamp()), int(end.timestamp())
    later = end_s + 400 * 86_400
    cases = [(HOURS, start_s + 3_600, end_s - 3_600), (DAYS, start_s, end_s),
             (RAW, start_s + 900, end_s), (HOURS, later, later + 86_400),
             (DAYS, later, later + 86_400)]  # fmt: skip
    for stale in (False, True):
        async with app.state.sessionmaker() as session:
            if stale:
                if session.get_bind().dialect.name != "sqlite":
                    break
                await session.execute(text("UPDATE reading_hour_chunks SET hours = NULL"))
                await session.execute(text("UPDATE reading_day_chunks SET days = NULL"))
                await session.commit()
            store = reading_store(session)
            for series, lo, hi in cases:
                found, together = await store.system_and_rows(session, series, system_id, lo, hi)
                alone = await store.rows(session, series, system_id, lo, hi)
                assert found == head, (series.name, lo, hi, stale)
                assert (lo < later) == (len(alone.starts) > 0)
                for name in ("starts", "energy_wh", "samples", "power_max_w"):
                    assert np.array_equal(
                        getattr(together, name), getattr(alone, name), equal_nan=True
                    ), (series.name, lo, hi, stale, name)
                    assert getattr(together, name).dtype == getattr(alone, name).dtype


def test_columns_out_of_order_are_sorted_by_time() -> None:
    """The guard for a database that hands the aggregated rows back out of order: every
    column follows its time key; columns already in order come back unchanged."""
    starts = np.array([1800, 0, 2700, 900], dtype=np.int64)
    energy = np.array([3.0, 1.0, 4.0, 2.0])
    power = np.array([np.nan, 10.0, 40.0, 20.0])
    sorted_starts, sorted_energy, sorted_power = in_time_order([starts, energy, power])
    assert sorted_starts.tolist() == [0, 900, 1800, 2700]
    assert sorted_energy.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert sorted_power[:2].tolist() == [10.0, 20.0]
    assert np.isnan(sorted_power[2])
    assert sorted_power[3] == 40.0
    ordered = [np.array([0, 900], dtype=np.int64), np.array([5.0, 6.0])]
    assert in_time_order(ordered) is ordered


async def test_reads_of_many_systems_match_each_systems_read(
    app: FastAPI, enterprise: Tenant
) -> None:
    """`rows_of_many` gives each system exactly its own `rows` (every double bit for bit,
    unreported power as NaN), with its place in the ids as owner — for a few ids and for more
    than 1,024 (on SQLite the packed owner-and-key integers then pass 2**53), for the raw
    quarter-hours and both rollups."""
    start = datetime(2025, 6, 15, tzinfo=UTC)
    count = 96 * 2
    async with client_for(app, enterprise.live) as client:
        ids = []
        for k in range(2):
            ids.append(
                (
                    await create_system(
                        client,
                        location={"latitude": 52.0, "longitude": 5.0,
                                  "timezone": "Europe/Amsterdam", "country": "NL"},
                    )
                )["id"]
            )  # fmt: skip
            items: list[dict[str, object]] = []
            for i in range(count):
                item: dict[str, object] = {
                    "timestamp": iso(start + timedelta(minutes=15 * i)),
                    "energy_wh": (i + 1) / 3.0 + 1e-9 * i + k,
                }
                if (i + k) % 4:
                    item["power_w"] = (i + 1) / 7.0 + k
                items.append(item)
            response = await upload(client, ids[-1], items)
            assert response.status_code == 200, response.text
    lo, hi = int(start.timestamp()) - 86400, int(start.timestamp()) + 3 * 86400
    unknown = [f"sys_unknown_{i}" for i in range(1100)]
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        for series in (RAW, HOURS, DAYS):
            own = [await store.rows(session, series, system_id, lo, hi) for system_id in ids]
            for listed in ([*ids], [ids[0], *unknown, ids[1]]):
                owners, rows = await store.rows_of_many(session, series, listed, lo, hi)
                places = [listed.index(system_id) for system_id in ids]
                assert owners.tolist() == [
                    place for place, part in zip(places, own, strict=True)
                    for _ in range(len(part.starts))
                ]  # fmt: skip
                at = 0
                for part in own:
                    end = at + len(part.starts)
                    for name in ("starts", "energy_wh", "samples", "power_max_w"):
                        got = getattr(rows, name)[at:end]
                        assert got.dtype == getattr(part, name).dtype
                        assert np.array_equal(got, getattr(part, name), equal_nan=True)
                    at = end
                assert at == len(rows.starts)
