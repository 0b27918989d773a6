"""SQL for readings and their rollups. Time keys are epoch seconds; arrays go in and out.

Bulk writes take the fastest path of each database: one `INSERT … SELECT FROM unnest(…)`
statement on PostgreSQL, an `executemany` of one prepared statement on SQLite; both are
`ON CONFLICT DO UPDATE` upserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import FloatArray, IntArray
from solarapi.models.readings import Reading, ReadingDay, ReadingHour

_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows of readings or of a rollup, as columns."""

    starts: IntArray
    energy_wh: FloatArray
    samples: IntArray
    power_max_w: FloatArray


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


def _columns(rows: Sequence[Any], width: int) -> list[list[Any]]:
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def _as_rows(
    starts: list[Any], energy: list[Any], samples: list[Any] | None, power: list[Any]
) -> Rows:
    start_array = np.array(starts, dtype=np.int64)
    return Rows(
        starts=start_array,
        energy_wh=np.array(energy, dtype=np.float64),
        samples=(
            np.ones(len(start_array), dtype=np.int64)
            if samples is None
            else np.array(samples, dtype=np.int64)
        ),
        power_max_w=np.array(power, dtype=np.float64),
    )


async def readings_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    """Raw quarter-hours with start in [start_s, end_s), in time order; samples = 1 each."""
    result = await session.execute(
        select(Reading.start_s, Reading.energy_wh, Reading.power_w)
        .where(Reading.system_id == system_id, Reading.start_s >= start_s, Reading.start_s < end_s)
        .order_by(Reading.start_s)
    )
    starts, energy, power = _columns(result.all(), 3)
    return _as_rows(starts, energy, None, power)


async def hours_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    result = await session.execute(
        select(
            ReadingHour.hour_s, ReadingHour.energy_wh, ReadingHour.samples, ReadingHour.power_max_w
        )
        .where(
            ReadingHour.system_id == system_id,
            ReadingHour.hour_s >= start_s,
            ReadingHour.hour_s < end_s,
        )
        .order_by(ReadingHour.hour_s)
    )
    starts, energy, samples, power = _columns(result.all(), 4)
    return _as_rows(starts, energy, samples, power)


async def days_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    result = await session.execute(
        select(
            ReadingDay.day_start_s, ReadingDay.energy_wh, ReadingDay.samples, ReadingDay.power_max_w
        )
        .where(
            ReadingDay.system_id == system_id,
            ReadingDay.day_start_s >= start_s,
            ReadingDay.day_start_s < end_s,
        )
        .order_by(ReadingDay.day_start_s)
    )
    starts, energy, samples, power = _columns(result.all(), 4)
    return _as_rows(starts, energy, samples, power)


async def existing_starts(session: AsyncSession, system_id: str, starts: IntArray) -> IntArray:
    """Which of `starts` already have a reading (for the upload's inserted/updated counts)."""
    if len(starts) == 0:
        return np.empty(0, dtype=np.int64)
    result = await session.execute(
        select(Reading.start_s).where(
            Reading.system_id == system_id,
            Reading.start_s >= int(starts.min()),
            Reading.start_s <= int(starts.max()),
        )
    )
    stored = np.fromiter(result.scalars(), dtype=np.int64)
    return starts[np.isin(starts, stored)]


async def latest_reading(session: AsyncSession, system_id: str) -> tuple[int, float | None] | None:
    row = (
        await session.execute(
            select(Reading.start_s, Reading.power_w)
            .where(Reading.system_id == system_id)
            .order_by(Reading.start_s.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else (int(row[0]), row[1])


async def reading_span(session: AsyncSession, system_id: str) -> tuple[int, int] | None:
    row = (
        await session.execute(
            select(func.min(Reading.start_s), func.max(Reading.start_s)).where(
                Reading.system_id == system_id
            )
        )
    ).first()
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1])


def _nullable(values: FloatArray) -> list[float | None]:
    return [None if value != value else value for value in values.tolist()]


async def upsert_readings(
    session: AsyncSession,
    system_id: str,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
) -> None:
    """Insert or replace readings (power NaN = not reported = NULL)."""
    await _upsert(
        session,
        "readings",
        ("start_s", "energy_wh", "power_w"),
        ("bigint", "double precision", "double precision"),
        system_id,
        [starts.tolist(), energy_wh.tolist(), _nullable(power_w)],
    )


async def upsert_hours(session: AsyncSession, system_id: str, rows: Rows) -> None:
    await _upsert_rollup(session, "reading_hours", "hour_s", system_id, rows)


async def upsert_days(session: AsyncSession, system_id: str, rows: Rows) -> None:
    await _upsert_rollup(session, "reading_days", "day_start_s", system_id, rows)


async def _upsert_rollup(
    session: AsyncSession, table: str, key: str, system_id: str, rows: Rows
) -> None:
    await _upsert(
        session,
        table,
        (key, "energy_wh", "samples", "power_max_w"),
        ("bigint", "double precision", "integer", "double precision"),
        system_id,
        [
            rows.starts.tolist(),
            rows.energy_wh.tolist(),
            rows.samples.tolist(),
            _nullable(rows.power_max_w),
        ],
    )


async def _upsert(
    session: AsyncSession,
    table: str,
    columns: tuple[str, ...],
    pg_types: tuple[str, ...],
    system_id: str,
    values: list[list[Any]],
) -> None:
    """`INSERT … ON CONFLICT (system_id, <first column>) DO UPDATE` of column lists.

    Table and column names are constants of this module, never client input."""
    count = len(values[0])
    if count == 0:
        return
    key, *rest = columns
    names = ", ".join(columns)
    updates = ", ".join(f"{column} = excluded.{column}" for column in rest)
    conflict = f"ON CONFLICT (system_id, {key}) DO UPDATE SET {updates}"
    if _dialect(session) == "postgresql":
        arrays = ", ".join(f"CAST(:c{i} AS {kind}[])" for i, kind in enumerate(pg_types))
        statement = text(
            f"INSERT INTO {table} (system_id, {names}) "  # noqa: S608 - constant identifiers
            f"SELECT :system_id, * FROM unnest({arrays}) {conflict}"
        )
        for lo in range(0, count, _CHUNK):
            params: dict[str, Any] = {"system_id": system_id}
            for i, column in enumerate(values):
                params[f"c{i}"] = column[lo : lo + _CHUNK]
            await session.execute(statement, params)
        return
    marks = ", ".join("?" for _ in range(len(columns) + 1))
    sql = f"INSERT INTO {table} (system_id, {names}) VALUES ({marks}) {conflict}"  # noqa: S608
    connection = await session.connection()
    rows = [(system_id, *row) for row in zip(*values, strict=True)]
    await connection.exec_driver_sql(sql, rows)


async def delete_days(session: AsyncSession, system_id: str) -> None:
    await session.execute(delete(ReadingDay).where(ReadingDay.system_id == system_id))
