"""The rollups and the raw quarter-hours as the readings store reads them equal
`reading_days`, `reading_hours` and `readings` row for row, bit for bit, after every kind
of write: on SQLite the store reads their packed copies (`reading_day_chunks`, migration
0022; `reading_hour_chunks`, 0024; `reading_chunks`, 0025), which the triggers mark stale
and the store's upserts pack again; on PostgreSQL the tables themselves. Each test runs for
all three (one shape, `store_sqlite.Chunks`)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.kit.grid import EnergySeries
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from solarapi.readings.repository import reading_store
from solarapi.readings.store_sqlite import DAY_CHUNKS, HOUR_CHUNKS, RAW_CHUNKS, Chunks
from tests.support import Tenant, client_for, execute_sql, make_tenant, running_app
from tests.systems.factories import create_system, iso, upload

START = datetime(2025, 3, 1, tzinfo=UTC)
DAYS_UPLOADED = 120  # spans three day chunks of 2**22 s (~48.5 days), ~80 hour chunks

ROLLUPS = [
    pytest.param(DAY_CHUNKS, id="days"),
    pytest.param(HOUR_CHUNKS, id="hours"),
    pytest.param(RAW_CHUNKS, id="quarters"),
]


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


def _sql(chunks: Chunks, template: str) -> str:
    series = chunks.series
    return template.format(
        rollup=series.name,
        key=series.key,
        columns=", ".join(name for name, _ in series.columns),
        power=series.columns[-1][0],
        table=chunks.table,
        column=chunks.column,
        shift=chunks.shift,
    )


async def _stored(app: FastAPI, chunks: Chunks, system_id: str) -> list[tuple[Any, ...]]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            text(
                _sql(
                    chunks,
                    "SELECT {columns} FROM {rollup} WHERE system_id = :id ORDER BY {key}",
                )
            ),
            {"id": system_id},
        )
        return [tuple(row) for row in rows]


def _as_rows(chunks: Chunks, series: EnergySeries) -> list[tuple[Any, ...]]:
    """The rows as the table's columns hold them (raw quarter-hours have no `samples`)."""
    columns = [series.starts, series.energy_wh, series.samples, series.power_max_w]
    if len(chunks.series.columns) == 3:
        assert (series.samples == 1).all()
        del columns[2]
    return [
        (*row[:-1], None if row[-1] != row[-1] else row[-1])
        for row in zip(*(column.tolist() for column in columns), strict=True)
    ]


async def _assert_reads_equal_the_table(app: FastAPI, chunks: Chunks, ids: list[str]) -> None:
    """Every system's rows through `rows` (whole, and ranges cut inside chunks) and through
    `rows_of_many` are the rollup's rows; on SQLite no chunk is left stale by the API's
    writes and every chunk with rows has its row."""
    series = chunks.series
    stored = {system_id: await _stored(app, chunks, system_id) for system_id in ids}
    starts = [row[0] for rows in stored.values() for row in rows]
    assert starts, "no rows stored"
    lo, hi = int(min(starts)), int(max(starts))
    cuts = [
        (0, 2**62),
        (lo + 10 * 86400, hi - 20 * 86400),
        (lo + 50 * 86400, lo + 51 * 86400),
        (lo + 7 * 3600, lo + 31 * 3600),  # a day of hours, inside one or two hour chunks
    ]
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        for start_s, end_s in cuts:
            expected = {
                system_id: [row for row in rows if start_s <= row[0] < end_s]
                for system_id, rows in stored.items()
            }
            for system_id in ids:
                own = await store.rows(session, series, system_id, start_s, end_s)
                assert _as_rows(chunks, own) == expected[system_id]
                head, rows = await store.system_and_rows(session, series, system_id, start_s, end_s)
                assert head is not None
                assert head.id == system_id
                assert _as_rows(chunks, rows) == expected[system_id]
            listed = [ids[-1], "sys_unknown", *ids[:-1]]
            owners, rows = await store.rows_of_many(session, series, listed, start_s, end_s)
            assert owners.dtype == np.int64
            by_owner = [
                (listed[owner], row)
                for owner, row in zip(owners.tolist(), _as_rows(chunks, rows), strict=True)
            ]
            assert by_owner == [
                (system_id, row) for system_id in listed for row in expected.get(system_id, [])
            ]
        if app.state.settings.is_sqlite:
            # This test's systems only: the suite's database is shared, and other tests
            # write readings by SQL around the store (their chunks stale, as they should be).
            stale = await session.execute(
                text(
                    _sql(
                        chunks,
                        "SELECT count(*) FROM {table} WHERE {column} IS NULL"
                        " AND system_id IN (SELECT value FROM json_each(:ids))",
                    )
                ),
                {"ids": json.dumps(ids)},
            )
            assert stale.scalar_one() == 0
            await _assert_every_chunk_has_its_row(session, chunks)


async def _assert_every_chunk_has_its_row(session: AsyncSession, chunks: Chunks) -> None:
    rows = await session.execute(
        text(
            _sql(
                chunks,
                "SELECT DISTINCT system_id, {key} >> {shift} FROM {rollup}"
                " EXCEPT SELECT system_id, chunk FROM {table}",
            )
        )
    )
    assert rows.all() == []


@pytest.mark.parametrize("chunks", ROLLUPS)
async def test_the_rows_read_equal_the_rollup_after_every_kind_of_write(
    app: FastAPI, enterprise: Tenant, chunks: Chunks
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
        await _assert_reads_equal_the_table(app, chunks, ids)
        for k, system_id in enumerate(ids):
            response = await upload(client, system_id, _items(11, k, 1.5, 5))
            assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, chunks, ids)
        # Stored quarter-hours replaced (the rollups computed again from the raw readings).
        response = await upload(client, ids[1], _items(9, 1, 2.25, 2))
        assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, chunks, ids)
        # A new zone: every day of the system deleted and rolled up again (hours stay).
        patched = await client.patch(
            f"/api/v1/systems/{ids[0]}", json={"location": {"timezone": "America/New_York"}}
        )
        assert patched.status_code == 200, patched.text
        await _assert_reads_equal_the_table(app, chunks, ids)


@pytest.mark.parametrize("chunks", ROLLUPS)
async def test_writes_around_the_store_are_read_too(
    app: FastAPI, enterprise: Tenant, chunks: Chunks
) -> None:
    """A write of the rollup that is not the store's (an operator's SQL, a future migration)
    leaves the chunks it touched stale on SQLite: the reads take those systems' rows from the
    table, and a chunk whose rows are all deleted goes with them."""
    series, shift = chunks.series, chunks.shift
    async with client_for(app, enterprise.live) as client:
        ids = [(await create_system(client, location=_location("Europe/London")))["id"]]
        ids.append((await create_system(client, location=_location("UTC")))["id"])
        for k, system_id in enumerate(ids):
            response = await upload(client, system_id, _items(10, k, 1.0, 4))
            assert response.status_code == 200, response.text
    stored = await _stored(app, chunks, ids[0])
    first, changed = int(stored[0][0]), int(stored[60][0])
    async with app.state.sessionmaker() as session:
        await session.execute(
            text(
                _sql(
                    chunks,
                    "UPDATE {rollup} SET energy_wh = energy_wh + 0.1, {power} = NULL"
                    " WHERE system_id = :id AND {key} = :start",
                )
            ),
            {"id": ids[0], "start": changed},
        )
        # Every row of the first chunk of the second system.
        await session.execute(
            text(_sql(chunks, "DELETE FROM {rollup} WHERE system_id = :id AND {key} < :end")),
            {"id": ids[1], "end": ((first >> shift) + 1) << shift},
        )
        await session.commit()
    assert (await _stored(app, chunks, ids[0]))[60][1:] == (
        stored[60][1] + 0.1,
        *stored[60][2:-1],
        None,
    )
    async with app.state.sessionmaker() as session:
        if app.state.settings.is_sqlite:
            found = await session.execute(
                text(
                    _sql(
                        chunks,
                        "SELECT system_id, chunk, {column} IS NULL FROM {table}"
                        " WHERE system_id IN (SELECT value FROM json_each(:ids))"
                        " ORDER BY system_id, chunk",
                    )
                ),
                {"ids": json.dumps(ids)},
            )
            marks = {(row[0], row[1]): row[2] for row in found}
            assert marks[(ids[0], changed >> shift)] == 1
            assert (ids[1], first >> shift) not in marks
            assert sum(marks.values()) == 1
            await _assert_every_chunk_has_its_row(session, chunks)
    # (The stale chunk's rows read from the table: the check of no stale chunk is skipped.)
    stored_now = {system_id: await _stored(app, chunks, system_id) for system_id in ids}
    # Ranges around the stale chunk: across it, starting or ending inside it, within it, and
    # beside it (packed chunks only): its own span from the table, the others decoded.
    day = 86400
    cuts = [
        (0, 2**62),
        (changed - 3 * day, changed + 3 * day),
        (changed - 1, changed + 1),
        (changed, changed + (1 << shift)),
        (changed - 5 * day, changed - 3 * day),
    ]
    async with app.state.sessionmaker() as session:
        store = reading_store(session)
        for system_id in ids:
            for start_s, end_s in cuts:
                expected = [row for row in stored_now[system_id] if start_s <= row[0] < end_s]
                own = await store.rows(session, series, system_id, start_s, end_s)
                assert _as_rows(chunks, own) == expected
                head, rows = await store.system_and_rows(session, series, system_id, start_s, end_s)
                assert head is not None
                assert _as_rows(chunks, rows) == expected
        owners, rows = await store.rows_of_many(session, series, ids, 0, 2**62)
        read = zip(owners.tolist(), _as_rows(chunks, rows), strict=True)
        assert [(ids[o], row) for o, row in read] == [
            (system_id, row) for system_id in ids for row in stored_now[system_id]
        ]
    # The next upload of that system packs its chunk again.
    async with client_for(app, enterprise.live) as client:
        response = await upload(client, ids[0], _items(14, 0, 1.0, 4))
        assert response.status_code == 200, response.text
        await _assert_reads_equal_the_table(app, chunks, ids)
        # A deleted system's chunks go with its rows.
        deleted = await client.delete(f"/api/v1/systems/{ids[0]}")
        assert deleted.status_code == 204, deleted.text
    if app.state.settings.is_sqlite:
        async with app.state.sessionmaker() as session:
            left = await session.execute(
                text(_sql(chunks, "SELECT count(*) FROM {table} WHERE system_id = :id")),
                {"id": ids[0]},
            )
            assert left.scalar_one() == 0


def _hourly(items: list[dict[str, object]]) -> dict[str, tuple[float, float | None, int]]:
    """The `1h` buckets of quarter-hours as the endpoint must answer them, computed here:
    start → (energy, largest power or None, samples)."""
    buckets: dict[str, list[Any]] = {}
    for item in items:
        moment = datetime.fromisoformat(str(item["timestamp"]).replace("Z", "+00:00"))
        hour = iso(moment.replace(minute=0))
        bucket = buckets.setdefault(hour, [0.0, None, 0])
        bucket[0] += item["energy_wh"]
        if "power_w" in item:
            bucket[1] = max(bucket[1] or 0.0, float(item["power_w"]))  # type: ignore[arg-type]
        bucket[2] += 1
    return {hour: (energy, power, samples) for hour, (energy, power, samples) in buckets.items()}


async def _hours_answered(
    client: Any, system_id: str, start: datetime, end: datetime
) -> dict[str, tuple[float, float | None, int]]:
    response = await client.get(
        f"/api/v1/systems/{system_id}/readings",
        params={"from": iso(start), "to": iso(end), "interval": "1h"},
    )
    assert response.status_code == 200, response.text
    return {
        bucket["start"]: (bucket["energy_wh"], bucket["power_max_w"], bucket["samples"])
        for bucket in response.json()["data"]
        if bucket["samples"]
    }


async def test_a_write_then_a_1h_read_answers_the_new_numbers(
    app: FastAPI, enterprise: Tenant
) -> None:
    """Over HTTP, each write is seen by the next `1h` read (on SQLite read from the packed
    hours): an upload of new quarter-hours, one added to stored hours, one that replaces
    stored quarter-hours, an operator's SQL (the chunk stale, read from `reading_hours`),
    then an upload packing it again. Values exact in binary, so the sums are exact."""
    day = START + timedelta(days=3)
    end = day + timedelta(days=2)

    def quarters(first: int, count: int, scale: float) -> list[dict[str, object]]:
        # `count` quarter-hours from the day's `first` one on.
        return [
            {
                "timestamp": iso(day + timedelta(minutes=15 * (first + q))),
                "energy_wh": scale * (q + 1),
                **({"power_w": scale * 8 * (q + 1)} if q % 3 else {}),
            }
            for q in range(count)
        ]

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, location=_location("Europe/Berlin")))["id"]
        assert await _hours_answered(client, system_id, day, end) == {}
        written = quarters(80, 38, 0.25)  # 20:00 to 05:30 the next day, its last hour half
        assert (await upload(client, system_id, written)).status_code == 200
        assert await _hours_answered(client, system_id, day, end) == _hourly(written)
        added = quarters(118, 24, 0.5)  # the half hour's other half (added to it), six more
        assert (await upload(client, system_id, added)).status_code == 200
        by_start = {str(item["timestamp"]): item for item in [*written, *added]}
        assert await _hours_answered(client, system_id, day, end) == _hourly(
            list(by_start.values())
        )
        replaced = quarters(88, 8, 1.75)  # two stored hours, every quarter-hour replaced
        assert (await upload(client, system_id, replaced)).status_code == 200
        by_start.update({str(item["timestamp"]): item for item in replaced})
        expected = _hourly(list(by_start.values()))
        assert await _hours_answered(client, system_id, day, end) == expected
        hour = iso(day + timedelta(hours=23))
        async with app.state.sessionmaker() as session:
            await session.execute(
                text(
                    "UPDATE reading_hours SET energy_wh = 1000.5"
                    " WHERE system_id = :id AND hour_s = :hour"
                ),
                {"id": system_id, "hour": int((day + timedelta(hours=23)).timestamp())},
            )
            await session.commit()
        expected[hour] = (1000.5, *expected[hour][1:])
        assert await _hours_answered(client, system_id, day, end) == expected
        again = quarters(92, 4, 2.0)  # that hour replaced through the API: packed again
        assert (await upload(client, system_id, again)).status_code == 200
        by_start.update({str(item["timestamp"]): item for item in again})
        assert await _hours_answered(client, system_id, day, end) == _hourly(
            list(by_start.values())
        )
    if app.state.settings.is_sqlite:
        async with app.state.sessionmaker() as session:
            counts = await session.execute(
                text(
                    "SELECT count(*), count(hours) FROM reading_hour_chunks WHERE system_id = :id"
                ),
                {"id": system_id},
            )
            total, packed = counts.one()
            assert total == packed > 0


@pytest.mark.parametrize(
    ("chunks", "below"),
    [
        pytest.param(DAY_CHUNKS, "0021_change_batches", id="days"),
        pytest.param(HOUR_CHUNKS, "0023_day_chunks_rowid", id="hours"),
        pytest.param(RAW_CHUNKS, "0024_reading_hour_chunks", id="quarters"),
    ],
)
async def test_the_migration_packs_the_stored_rows_as_the_store_does(
    blank_database: Settings, chunks: Chunks, below: str
) -> None:
    """0022, 0024 and 0025 on a database with rows: every chunk packed, byte for byte what
    the store's upsert packs; down again drops the table. On PostgreSQL the day chunks'
    table is made and stays empty, the hour chunks' and the quarter-hours' are never made."""
    settings = blank_database
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            for k, zone in enumerate(("Europe/Amsterdam", "Australia/Adelaide")):
                system_id = (await create_system(client, location=_location(zone)))["id"]
                response = await upload(client, system_id, _items(3, k, 1.0, 3))
                assert response.status_code == 200, response.text
    named = _sql(
        chunks,
        "SELECT name FROM sqlite_master WHERE name LIKE '{table}%'"
        if settings.is_sqlite
        else "SELECT tablename FROM pg_tables WHERE tablename = '{table}'",
    )
    select = _sql(
        chunks, "SELECT system_id, chunk, {column} FROM {table} ORDER BY system_id, chunk"
    )
    if settings.is_postgres and chunks is not DAY_CHUNKS:
        assert await execute_sql(settings, named) == []
        await asyncio.to_thread(downgrade, settings, below)
        await asyncio.to_thread(upgrade, settings)
        assert await execute_sql(settings, named) == []
        return
    packed_by_store = await execute_sql(settings, select)
    if settings.is_sqlite:
        every = await execute_sql(
            settings,
            _sql(
                chunks,
                "SELECT DISTINCT system_id, {key} >> {shift} FROM {rollup}",
            ),
        )
        assert len(packed_by_store) == len(every) >= (6 if chunks is DAY_CHUNKS else 150)
        assert all(row[2] is not None for row in packed_by_store)
    else:
        assert packed_by_store == []
    await asyncio.to_thread(downgrade, settings, below)
    assert await execute_sql(settings, named) == []
    await asyncio.to_thread(upgrade, settings)
    assert await execute_sql(settings, select) == packed_by_store
