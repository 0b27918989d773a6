"""The local-day rollup as the readings store reads it equals `reading_days` row for row, bit
for bit, after every kind of write: on SQLite the store reads the packed copy
(`reading_day_chunks`, migration 0022), which the triggers mark stale and the rollup upsert
packs again; on PostgreSQL the table itself."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.kit.grid import EnergySeries
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from solarapi.readings.repository import reading_store
from solarapi.readings.store import DAYS
from solarapi.readings.store_sqlite import CHUNK_SHIFT
from tests.support import Tenant, client_for, execute_sql, make_tenant, running_app
from tests.systems.factories import create_system, iso, upload

START = datetime(2025, 3, 1, tzinfo=UTC)
DAYS_UPLOADED = 120  # spans three chunks of 2**22 s (~48.5 days)


def _location(timezone: str) -> dict[str, object]:
    return {"latitude": 35.0, "longitude": 5.0, "timezone": timezone, "country": "NL"}


def _items(first_hour: int, k: int, scale: float, power_every: int) -> list[dict[str, object]]:
    # Four quarter-hours a day from `first_hour` UTC, values that use every bit of a double.
    items: list[dict[str, object]] = []
    for day in range(DAYS_UPLOADED):
        for q in range(4):
            i = day * 4 + q
            moment = START + timedelta(days=day, hours=first_hour, minutes=15 * q)
            item: dict[str, object] = {"timestamp": iso(moment), "energy_wh": scale * (i + 1) / 3}
            if (i + k) % power_every:
                item["power_w"] = scale * (i + 1) / 7 + k
            items.append(item)
    return items


async def _stored(app: FastAPI, system_id: str) -> list[tuple[Any, ...]]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            text(
                "SELECT day_start_s, energy_wh, samples, power_max_w FROM reading_days"
                " WHERE system_id = :id ORDER BY day_start_s"
            ),
            {"id": system_id},
        )
        return [tuple(row) for row in rows]


def _as_rows(series: EnergySeries) -> list[tuple[Any, ...]]:
    return [
        (start, energy, samples, None if power != power else power)
        for start, energy, samples, power in zip(
            series.starts.tolist(),
            series.energy_wh.tolist(),
            series.samples.tolist(),
            series.power_max_w.tolist(),
            strict=True,
        )
    ]


async def _assert_reads_equal_the_table(app: FastAPI, ids: list[str]) -> None:
    """Every system's days through `rows` (whole, and ranges cut inside chunks) and through
    `rows_of_many` are `reading_days`' rows; on SQLite no chunk is left stale by the API's
    writes and every chunk with days has its row."""
    stored = {system_id: await _stored(app, system_id) for system_id in ids}
    starts = [row[0] for rows in stored.values() for row in rows]
    assert starts, "no days stored"
    lo, hi = int(min(starts)), int(max(starts))
    cuts = [(0, 2**62), (lo + 10 * 86400, hi - 20 * 86400), (lo + 50 * 86400, lo + 51 * 86400)]
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        for start_s, end_s in cuts:
            expected = {
                system_id: [row for row in rows if start_s <= row[0] < end_s]
                for system_id, rows in stored.items()
            }
            for system_id in ids:
                own = await store.rows(session, DAYS, system_id, start_s, end_s)
                assert _as_rows(own) == expected[system_id]
            listed = [ids[-1], "sys_unknown", *ids[:-1]]
            owners, rows = await store.rows_of_many(session, DAYS, listed, start_s, end_s)
            assert owners.dtype == np.int64
            by_owner = [
                (listed[owner], row)
                for owner, row in zip(owners.tolist(), _as_rows(rows), strict=True)
            ]
            assert by_owner == [
                (system_id, row) for system_id in listed for row in expected.get(system_id, [])
            ]
        if app.state.settings.is_sqlite:
            stale = await session.execute(
                text("SELECT count(*) FROM reading_day_chunks WHERE days IS NULL")
            )
            assert stale.scalar_one() == 0
            await _assert_every_chunk_has_its_row(session)


async def _assert_every_chunk_has_its_row(session: AsyncSession) -> None:
    rows = await session.execute(
        text(
            f"SELECT DISTINCT system_id, day_start_s >> {CHUNK_SHIFT} FROM reading_days"  # noqa: S608
            " EXCEPT SELECT system_id, chunk FROM reading_day_chunks"
        )
    )
    assert rows.all() == []


async def test_the_days_read_equal_reading_days_after_every_kind_of_write(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        ids = [
            (await create_system(client, location=_location(zone)))["id"]
            for zone in ("Europe/Amsterdam", "Asia/Tokyo")
        ]
        # New quarter-hours (the add path), then others in the same days (added to them).
        for k, system_id in enumerate(ids):
            response = await upload(client, system_id, _items(9, k, 1.0, 3))
            assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, ids)
        for k, system_id in enumerate(ids):
            response = await upload(client, system_id, _items(11, k, 1.5, 5))
            assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, ids)
        # Stored quarter-hours replaced (the days computed again from the raw readings).
        response = await upload(client, ids[1], _items(9, 1, 2.25, 2))
        assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, ids)
        # A new zone: every day of the system deleted and rolled up again.
        patched = await client.patch(
            f"/api/v1/systems/{ids[0]}", json={"location": {"timezone": "America/New_York"}}
        )
        assert patched.status_code == 200, patched.text
        await _assert_reads_equal_the_table(app, ids)


async def test_writes_around_the_store_are_read_too(app: FastAPI, enterprise: Tenant) -> None:
    """A write of `reading_days` that is not the store's (an operator's SQL, a future
    migration) leaves the chunks it touched stale on SQLite: the reads take those systems'
    days from the table, and a chunk whose days are all deleted goes with them."""
    async with client_for(app, enterprise.live) as client:
        ids = [(await create_system(client, location=_location("Europe/London")))["id"]]
        ids.append((await create_system(client, location=_location("UTC")))["id"])
        for k, system_id in enumerate(ids):
            response = await upload(client, system_id, _items(10, k, 1.0, 4))
            assert response.status_code == 200, response.text
    stored = await _stored(app, ids[0])
    first, changed = int(stored[0][0]), int(stored[60][0])
    async with app.state.sessionmaker() as session:
        await session.execute(
            text(
                "UPDATE reading_days SET energy_wh = energy_wh + 0.1, power_max_w = NULL"
                " WHERE system_id = :id AND day_start_s = :day"
            ),
            {"id": ids[0], "day": changed},
        )
        # Every day of the first chunk of the second system.
        await session.execute(
            text("DELETE FROM reading_days WHERE system_id = :id AND day_start_s < :end"),
            {"id": ids[1], "end": ((first >> CHUNK_SHIFT) + 1) << CHUNK_SHIFT},
        )
        await session.commit()
    assert (await _stored(app, ids[0]))[60][1:] == (stored[60][1] + 0.1, stored[60][2], None)
    async with app.state.sessionmaker() as session:
        if app.state.settings.is_sqlite:
            chunks = await session.execute(
                text(
                    "SELECT system_id, chunk, days IS NULL FROM reading_day_chunks"
                    " ORDER BY system_id, chunk"
                )
            )
            marks = {(row[0], row[1]): row[2] for row in chunks}
            assert marks[(ids[0], changed >> CHUNK_SHIFT)] == 1
            assert (ids[1], first >> CHUNK_SHIFT) not in marks
            assert sum(marks.values()) == 1
            await _assert_every_chunk_has_its_row(session)
    # (The stale chunk's system read from the table: the check of no stale chunk is skipped.)
    stored_now = {system_id: await _stored(app, system_id) for system_id in ids}
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        for system_id in ids:
            own = await store.rows(session, DAYS, system_id, 0, 2**62)
            assert _as_rows(own) == stored_now[system_id]
        owners, rows = await store.rows_of_many(session, DAYS, ids, 0, 2**62)
        assert [(ids[o], row) for o, row in zip(owners.tolist(), _as_rows(rows), strict=True)] == [
            (system_id, row) for system_id in ids for row in stored_now[system_id]
        ]
    # The next upload of that system packs its chunk again.
    async with client_for(app, enterprise.live) as client:
        response = await upload(client, ids[0], _items(14, 0, 1.0, 4))
        assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, ids)
        # A deleted system's chunks go with its days.
        deleted = await client.delete(f"/api/v1/systems/{ids[0]}")
        assert deleted.status_code == 204, deleted.text
    async with app.state.sessionmaker() as session:
        left = await session.execute(
            text("SELECT count(*) FROM reading_day_chunks WHERE system_id = :id"), {"id": ids[0]}
        )
        assert left.scalar_one() == 0


async def test_the_migration_packs_the_stored_days_as_the_store_does(
    blank_database: Settings,
) -> None:
    """0022 on a database with days: every chunk packed, byte for byte what the store's
    upsert packs (on PostgreSQL the table is made and stays empty); down again drops it."""
    settings = blank_database
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            for k, zone in enumerate(("Europe/Amsterdam", "Australia/Adelaide")):
                system_id = (await create_system(client, location=_location(zone)))["id"]
                response = await upload(client, system_id, _items(3, k, 1.0, 3))
                assert response.status_code == 200, response.text
    chunks = "SELECT system_id, chunk, days FROM reading_day_chunks ORDER BY system_id, chunk"
    packed_by_store = await execute_sql(settings, chunks)
    assert len(packed_by_store) == (6 if settings.is_sqlite else 0)
    await asyncio.to_thread(downgrade, settings, "0021_change_batches")
    tables = await execute_sql(
        settings,
        "SELECT name FROM sqlite_master WHERE name LIKE 'reading_day_chunks%'"
        if settings.is_sqlite
        else "SELECT tablename FROM pg_tables WHERE tablename = 'reading_day_chunks'",
    )
    assert tables == []
    await asyncio.to_thread(upgrade, settings)
    assert await execute_sql(settings, chunks) == packed_by_store
