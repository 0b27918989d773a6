"""An upload of new quarter-hours is one statement on PostgreSQL, tried first with the system
as the worker last read it (`readings.upload`); everything else takes the general way. The
answers and what is stored must not depend on which way an upload took: a system changed
since the worker read it, an account with more webhook endpoints than the statement has
delivery ids, a re-upload. Both databases (SQLite always takes the general way)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from solarapi.events.service import PREPARED_DELIVERIES
from solarapi.events.types import DELIVERY_JOB_KIND
from solarapi.jobs.kinds import ALERTS_EVALUATE
from solarapi.models.jobs import Job
from solarapi.models.readings import Reading, ReadingDay, ReadingHour
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload
from tests.webhooks.test_endpoints import PUBLIC_URL

JUNE = datetime(2025, 6, 10, tzinfo=UTC)
SYDNEY = {"latitude": -33.87, "longitude": 151.21, "timezone": "Australia/Sydney"}


async def _jobs(app: FastAPI, kind: str) -> list[dict[str, Any]]:
    async with app.state.sessionmaker() as session:
        rows = await session.scalars(select(Job).where(Job.kind == kind))
        return [job.payload for job in rows]


async def test_a_capacity_lowered_since_the_last_upload_is_the_one_checked(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, capacity_kwp=10.0))["id"]
        first = await upload(client, system_id, quarter_series(JUNE, 4, 900.0))
        assert first.status_code == 200, first.text  # under 10 kWp's 3,750 Wh
        patched = await client.patch(f"/api/v1/systems/{system_id}", json={"capacity_kwp": 2.0})
        assert patched.status_code == 200, patched.text
        # 900 Wh is over 2 kWp's 750 Wh: the worker's kept 10 kWp must not let it through.
        refused = await upload(client, system_id, quarter_series(JUNE.replace(hour=6), 4, 900.0))
        assert refused.status_code == 400, refused.text
        assert "2.0 kWp" in refused.json()["error"]
        fits = await upload(client, system_id, quarter_series(JUNE.replace(hour=6), 4, 700.0))
        assert fits.json() == {"received": 4, "inserted": 4, "updated": 0}


async def test_days_follow_a_time_zone_changed_since_the_last_upload(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The second upload's quarter-hours lie on either side of Sydney's midnight: bucketed
    with the kept Amsterdam zone they would fall in one day."""
    late = datetime(2025, 6, 10, 13, 0, tzinfo=UTC)  # 23:00 in Sydney (AEST, +10)
    async with client_for(app, enterprise.live) as client:
        moved = (await create_system(client))["id"]  # Europe/Amsterdam
        born = (await create_system(client, location=SYDNEY))["id"]
        for system_id in (moved, born):
            response = await upload(client, system_id, quarter_series(JUNE, 4, 100.0))
            assert response.status_code == 200, response.text
        patched = await client.patch(f"/api/v1/systems/{moved}", json={"location": SYDNEY})
        assert patched.status_code == 200, patched.text
        days = {}
        for system_id in (moved, born):
            response = await upload(client, system_id, quarter_series(late, 8, 50.0))
            assert response.json() == {"received": 8, "inserted": 8, "updated": 0}
            readings = await client.get(
                f"/api/v1/systems/{system_id}/readings",
                params={
                    "from": "2025-06-09T00:00:00+10:00",
                    "to": "2025-06-13T00:00:00+10:00",
                    "interval": "1d",
                },
            )
            days[system_id] = [
                (bucket["start"], bucket["energy_wh"]) for bucket in readings.json()["data"]
            ]
        assert days[moved] == days[born]
        assert [energy for _, energy in days[born]] == [None, 400.0 + 200.0, 200.0, None]


async def test_every_subscribed_endpoint_gets_its_delivery(
    app: FastAPI, enterprise: Tenant
) -> None:
    """More endpoints than the one statement has delivery ids for: the general way queues
    them all; fewer: the statement does. Either way one job per endpoint, and one alert
    evaluation per upload."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        made: list[str] = []
        for count in (2, PREPARED_DELIVERIES + 1):
            while len(made) < count:
                created = await client.post(
                    "/api/v1/webhooks", json={"url": PUBLIC_URL, "events": ["readings.uploaded"]}
                )
                assert created.status_code == 201, created.text
                made.append(created.json()["id"])
            before = await _jobs(app, DELIVERY_JOB_KIND)
            hour = JUNE.replace(hour=count)
            response = await upload(client, system_id, quarter_series(hour, 4, 10.0))
            assert response.status_code == 200, response.text
            events = (await client.get("/api/v1/events")).json()["data"]
            event = next(e for e in events if e["type"] == "readings.uploaded")
            assert event["data"]["from"] == hour.strftime("%Y-%m-%dT%H:%M:%SZ")
            queued = [p for p in await _jobs(app, DELIVERY_JOB_KIND) if p not in before]
            assert sorted(p["endpoint_id"] for p in queued) == sorted(made)
            assert {(p["event_id"], p["attempt"]) for p in queued} == {(event["id"], 1)}
        evaluations = await _jobs(app, ALERTS_EVALUATE)
        assert evaluations.count({"system_id": system_id}) == 2


async def test_a_large_batch_stores_what_a_small_one_stores(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A large batch of new quarter-hours goes by COPY on PostgreSQL (rows encoded by numpy,
    a missing power as NULL), a small one in one statement: the readings, the rollups and
    the change feed must come out the same, and both go with their system."""
    from tests.changes.test_feed import follow

    count = 700  # over the COPY's threshold
    items = quarter_series(JUNE, count, 25.0)
    for i, item in enumerate(items):
        if i % 3:
            item["power_w"] = float(i)
    async with client_for(app, enterprise.live) as client:
        large = (await create_system(client))["id"]
        small = (await create_system(client))["id"]
        response = await upload(client, large, items)
        assert response.json() == {"received": count, "inserted": count, "updated": 0}
        for lo in range(0, count, 100):
            response = await upload(client, small, items[lo : lo + 100])
            assert response.status_code == 200, response.text
        rows, _ = await follow(client)
        by_system: dict[str, list[tuple[str, float, float | None]]] = {large: [], small: []}
        for row in rows:
            by_system[row["system_id"]].append((row["timestamp"], row["energy_wh"], row["power_w"]))
        expected = [(i["timestamp"], 25.0, i.get("power_w")) for i in items]
        assert sorted(by_system[large]) == sorted(expected)
        assert sorted(by_system[small]) == sorted(expected)
        for resolution in ("15m", "1h", "1d"):
            answers = [
                (
                    await client.get(
                        f"/api/v1/systems/{system_id}/readings",
                        params={
                            "from": "2025-06-10T00:00:00Z",
                            "to": "2025-06-18T00:00:00Z",
                            "resolution": resolution,
                        },
                    )
                ).json()["data"]
                for system_id in (large, small)
            ]
            assert answers[0] == answers[1]
            assert answers[0]
        deleted = await client.delete(f"/api/v1/systems/{large}")
        assert deleted.status_code == 204, deleted.text
        rows, _ = await follow(client)
        assert {row["system_id"] for row in rows} == {small}


ADELAIDE = {"latitude": -34.93, "longitude": 138.6, "timezone": "Australia/Adelaide"}


async def _rollups(app: FastAPI, system_id: str) -> tuple[dict[int, Any], dict[int, Any]]:
    """The system's hourly and daily rollup rows as stored: key → (energy, samples, max power)."""
    async with app.state.sessionmaker() as session:
        tables = []
        for model, key in ((ReadingHour, ReadingHour.hour_s), (ReadingDay, ReadingDay.day_start_s)):
            rows = await session.execute(
                select(key, model.energy_wh, model.samples, model.power_max_w).where(
                    model.system_id == system_id
                )
            )
            tables.append({row[0]: tuple(row[1:]) for row in rows})
        return tables[0], tables[1]


async def _sums_of_readings(
    app: FastAPI, system_id: str, timezone: str
) -> tuple[dict[int, Any], dict[int, Any]]:
    """The hourly and local-daily sums of the system's stored readings, computed here."""
    zone = ZoneInfo(timezone)
    async with app.state.sessionmaker() as session:
        rows = (
            await session.execute(
                select(Reading.start_s, Reading.energy_wh, Reading.power_w).where(
                    Reading.system_id == system_id
                )
            )
        ).all()
    hours: dict[int, list[Any]] = {}
    days: dict[int, list[Any]] = {}
    for start_s, energy, power in rows:
        local = datetime.fromtimestamp(start_s, zone)
        midnight = int(datetime.combine(local.date(), time(), zone).timestamp())
        for table, key in ((hours, start_s - start_s % 3600), (days, midnight)):
            row = table.setdefault(key, [0.0, 0, None])
            row[0] += energy
            row[1] += 1
            if power is not None and (row[2] is None or power > row[2]):
                row[2] = power
    return (
        {key: tuple(row) for key, row in hours.items()},
        {key: tuple(row) for key, row in days.items()},
    )


def _varied(start: datetime, count: int, offset: int) -> list[dict[str, Any]]:
    """Quarter-hours with energies exact in binary (sums do not depend on their order) and
    a power missing from every third, and from whole hours (a rollup row without a maximum,
    NULL in the COPY)."""
    items = quarter_series(start, count)
    for i, item in enumerate(items):
        n = offset + i
        item["energy_wh"] = 1.0 + (n % 7) * 0.5
        item["power_w"] = None if n % 3 == 0 or n // 8 % 5 == 0 else float(n % 13) * 10.0
    return items


@pytest.mark.parametrize("size", [6, 700])  # one statement; the COPY after it
async def test_rollups_are_the_sums_of_the_readings_after_uploads_one_after_another(
    app: FastAPI, enterprise: Tenant, size: int
) -> None:
    """Each upload after the system's last reading: on PostgreSQL a large one adds only its
    first hour and first local day to stored rows and COPYs the rest as new. Uploads that
    continue in the hour and the local day of the one before (none, one and seven
    quarter-hours apart), in a half-hour zone (Adelaide's midnight is at :30 UTC): the
    rollups must equal the sums of the stored readings."""
    start = datetime(2025, 6, 10, 10, 30, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, location=ADELAIDE))["id"]
        offset = 0
        for gap in (0, 1, 7, 0, 1):
            offset += gap
            moment = start + timedelta(minutes=15 * offset)
            response = await upload(client, system_id, _varied(moment, size, offset))
            assert response.json() == {"received": size, "inserted": size, "updated": 0}
            offset += size
    hours, days = await _rollups(app, system_id)
    expected_hours, expected_days = await _sums_of_readings(app, system_id, "Australia/Adelaide")
    assert sum(samples for _, samples, _ in expected_hours.values()) == 5 * size
    assert hours == expected_hours
    assert days == expected_days
    assert len(days) > 1
    assert None in {power for _, _, power in hours.values()}


@pytest.mark.parametrize("size", [120, 700])  # one statement; the COPY after it
async def test_a_rollup_row_beyond_the_first_hour_and_day_is_added_to(
    app: FastAPI, enterprise: Tenant, size: int
) -> None:
    """A rollup row where, after the system's last reading, none should be. A large batch's
    COPY of the rollup rows after its first hour and day assumes none: it fails, the whole
    transaction with it, and the upload takes the general way, which adds to the row, as
    the one statement of a small batch does. Either way every reading is stored and logged
    once, one event, the planted rows added to and the others the readings' sums."""
    from tests.changes.test_feed import follow

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]  # Europe/Amsterdam: midnight 22:00 UTC
        first = await upload(client, system_id, _varied(JUNE, 4, 0))
        assert first.status_code == 200, first.text
        planted_hour = int(JUNE.timestamp()) + 3 * 3600
        planted_day = int(datetime(2025, 6, 10, 22, tzinfo=UTC).timestamp())  # 11 June
        async with app.state.sessionmaker() as session, session.begin():
            session.add(ReadingHour(system_id=system_id, hour_s=planted_hour, energy_wh=1000.0,
                                    samples=1, power_max_w=5000.0))  # fmt: skip
            session.add(ReadingDay(system_id=system_id, day_start_s=planted_day,
                                   energy_wh=2000.0, samples=2, power_max_w=None))  # fmt: skip
        response = await upload(client, system_id, _varied(JUNE + timedelta(hours=1), size, 4))
        assert response.json() == {"received": size, "inserted": size, "updated": 0}
        rows, _ = await follow(client)
        events = (await client.get("/api/v1/events")).json()["data"]
    assert len(rows) == 4 + size
    assert len({row["timestamp"] for row in rows}) == 4 + size
    assert [e["type"] for e in events].count("readings.uploaded") == 2
    hours, days = await _rollups(app, system_id)
    expected_hours, expected_days = await _sums_of_readings(app, system_id, "Europe/Amsterdam")
    energy, samples, power = expected_hours.pop(planted_hour)
    assert hours.pop(planted_hour) == (1000.0 + energy, 1 + samples, 5000.0)
    assert hours == expected_hours
    energy, samples, power = expected_days.pop(planted_day)
    assert days.pop(planted_day) == (2000.0 + energy, 2 + samples, power)
    assert days == expected_days
