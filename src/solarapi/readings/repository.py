"""SQL for readings and their rollups. Time keys are epoch seconds; arrays go in and out.

Bulk writes take the fastest path of each database: one `INSERT … SELECT FROM unnest(…)`
statement on PostgreSQL, an `executemany` of one prepared statement on SQLite; both are
`ON CONFLICT DO UPDATE` upserts.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import fetch_rows
from solarapi.kit.grid import FloatArray, IntArray
from solarapi.models.readings import Reading, ReadingDay

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


# How each column type travels from PostgreSQL: as one big-endian binary string per column
# (`string_agg` of `<type>send`), which numpy reads without a Python object per value.
# Missing floats travel as NaN, which is what they become in the arrays anyway.
_PG_COLUMN = {
    "int8": ("int8send({})", ">i8", np.int64),
    "int4": ("int4send({})", ">i4", np.int64),
    "float8": ("float8send(coalesce({}, 'NaN'))", ">f8", np.float64),
}


async def _read_columns(
    session: AsyncSession,
    table: str,
    columns: tuple[tuple[str, str], ...],
    system_id: str,
    start_s: int,
    end_s: int,
) -> list[npt.NDArray[Any]]:
    """Columns (name, type: int8/int4/float8) of a system's rows of `table` whose first
    column lies in [start_s, end_s), as arrays in time order; NULL floats → NaN.

    Column-wise on the session's own connection (so inside its transaction), through the
    driver: building a Python tuple per row, and numpy arrays from those, cost several times
    the query itself on a year of quarter-hours (35,040 rows). Table and column names are
    constants of this module, never client input."""
    key = columns[0][0]
    names = ", ".join(name for name, _ in columns)
    where = f"FROM {table} WHERE system_id = $1 AND {key} >= $2 AND {key} < $3"
    arrays: list[npt.NDArray[Any]]
    params = (system_id, start_s, end_s)
    if _dialect(session) == "postgresql":
        aggregates = ", ".join(
            f"string_agg({_PG_COLUMN[kind][0].format(name)}, '')" for name, kind in columns
        )
        sql = f"SELECT {aggregates} FROM (SELECT {names} {where} ORDER BY {key}) AS r"  # noqa: S608
        (row,) = await fetch_rows(session, sql, params)  # an aggregate: always one row
        arrays = [
            np.frombuffer(b"" if blob is None else blob, dtype=_PG_COLUMN[kind][1]).astype(
                _PG_COLUMN[kind][2]
            )
            for blob, (_, kind) in zip(row, columns, strict=True)
        ]
    else:
        sql = f"SELECT {names} {where} ORDER BY {key}".replace("$", "?")
        rows = await fetch_rows(session, sql, params)
        # One conversion of the whole table (NULL → NaN); epoch seconds and counts are exact
        # in float64 (< 2**53).
        matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(columns))
        arrays = [
            matrix[:, i].astype(np.int64) if kind != "float8" else matrix[:, i]
            for i, (_, kind) in enumerate(columns)
        ]
    return in_time_order(arrays)


def in_time_order(arrays: list[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    """Parallel columns (the first one the time key) sorted by time. An aggregate over an
    ordered subquery keeps that order in practice, but SQL does not promise it (a parallel
    plan could interleave): check, which is cheap, and sort only when it did not hold."""
    starts = arrays[0]
    if len(starts) > 1 and not bool(np.all(starts[1:] > starts[:-1])):
        order = np.argsort(starts, kind="stable")
        return [array[order] for array in arrays]
    return arrays


async def readings_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    """Raw quarter-hours with start in [start_s, end_s), in time order; samples = 1 each."""
    starts, energy, power = await _read_columns(
        session,
        "readings",
        (("start_s", "int8"), ("energy_wh", "float8"), ("power_w", "float8")),
        system_id,
        start_s,
        end_s,
    )
    return Rows(starts, energy, np.ones(len(starts), dtype=np.int64), power)


async def hours_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    return await _rollup_between(session, "reading_hours", "hour_s", system_id, start_s, end_s)


async def days_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    return await _rollup_between(session, "reading_days", "day_start_s", system_id, start_s, end_s)


async def _rollup_between(
    session: AsyncSession, table: str, key: str, system_id: str, start_s: int, end_s: int
) -> Rows:
    starts, energy, samples, power_max = await _read_columns(
        session,
        table,
        ((key, "int8"), ("energy_wh", "float8"), ("samples", "int4"), ("power_max_w", "float8")),
        system_id,
        start_s,
        end_s,
    )
    return Rows(starts, energy, samples, power_max)


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
    *,
    all_new: bool = False,
) -> None:
    """Insert or replace readings (power NaN = not reported = NULL). `all_new` (the caller
    holds the system's lock and knows none exists) inserts without the conflict check:
    10,000 rows took 101 instead of 122 ms on PostgreSQL."""
    await _upsert(
        session,
        "readings",
        ("start_s", "energy_wh", "power_w"),
        ("bigint", "double precision", "double precision"),
        system_id,
        [starts.tolist(), energy_wh.tolist(), _nullable(power_w)],
        updates="" if all_new else None,
    )


async def lock_system(session: AsyncSession, system_id: str) -> None:
    """Take the system's write lock for the rest of the transaction, so that checking which
    readings exist and writing them cannot interleave with another upload to the system."""
    if _dialect(session) == "postgresql":
        statement = "SELECT 1 FROM systems WHERE id = :id FOR UPDATE"
    else:
        # SQLite has no row locks; a write (a no-op one) starts the transaction and takes the
        # database's write lock now instead of at the first real write.
        statement = "UPDATE systems SET name = name WHERE id = :id"
    await session.execute(text(statement), {"id": system_id})


async def upsert_hours(
    session: AsyncSession, system_id: str, rows: Rows, *, add: bool = False
) -> None:
    """Store hourly rollup rows; `add` adds them to existing rows instead of replacing."""
    await _upsert_rollup(session, "reading_hours", "hour_s", system_id, rows, add)


async def upsert_days(
    session: AsyncSession, system_id: str, rows: Rows, *, add: bool = False
) -> None:
    await _upsert_rollup(session, "reading_days", "day_start_s", system_id, rows, add)


# Adding a rollup row to a stored one: sums add up, the maximum ignores missing powers
# (written out because SQLite's max() of NULL is NULL and PostgreSQL's GREATEST is not).
def _additive(table: str) -> str:
    return (
        f"energy_wh = {table}.energy_wh + excluded.energy_wh, "
        f"samples = {table}.samples + excluded.samples, "
        f"power_max_w = CASE WHEN excluded.power_max_w IS NULL THEN {table}.power_max_w "
        f"WHEN {table}.power_max_w IS NULL OR excluded.power_max_w > {table}.power_max_w "
        f"THEN excluded.power_max_w ELSE {table}.power_max_w END"
    )


async def _upsert_rollup(
    session: AsyncSession, table: str, key: str, system_id: str, rows: Rows, add: bool
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
        updates=_additive(table) if add else None,
    )


async def _upsert(
    session: AsyncSession,
    table: str,
    columns: tuple[str, ...],
    pg_types: tuple[str, ...],
    system_id: str,
    values: list[list[Any]],
    updates: str | None = None,
) -> None:
    """`INSERT … ON CONFLICT (system_id, <first column>) DO UPDATE` of column lists
    (`updates`: the SET clause; None = replace every column; "" = a plain INSERT).

    Table and column names are constants of this module, never client input."""
    count = len(values[0])
    if count == 0:
        return
    key, *rest = columns
    names = ", ".join(columns)
    if updates is None:
        updates = ", ".join(f"{column} = excluded.{column}" for column in rest)
    conflict = f"ON CONFLICT (system_id, {key}) DO UPDATE SET {updates}" if updates else ""
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
    # zip builds the row tuples in C; repeat() is endless, so not strict.
    rows = list(zip(itertools.repeat(system_id), *values, strict=False))
    await connection.exec_driver_sql(sql, rows)


async def delete_days(session: AsyncSession, system_id: str) -> None:
    await session.execute(delete(ReadingDay).where(ReadingDay.system_id == system_id))
