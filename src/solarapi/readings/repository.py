"""SQL for readings and their rollups. Time keys are epoch seconds; arrays go in and out.

Bulk writes take the fastest path of each database: one `INSERT … SELECT FROM unnest(…)`
statement on PostgreSQL, an `executemany` of one prepared statement on SQLite; both are
`ON CONFLICT DO UPDATE` upserts.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    ColumnElement,
    FromClause,
    LargeBinary,
    Select,
    bindparam,
    case,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery, fetch_rows
from solarapi.kit.grid import FloatArray, IntArray
from solarapi.models.base import UtcDateTime
from solarapi.models.readings import Reading, ReadingDay, ReadingHour
from solarapi.models.systems import System, SystemRecord
from solarapi.systems.repository import SYSTEM_COLUMNS, get_record, record

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


@dataclass(frozen=True)
class Series:
    """A time series table read by range: its time key first, then the value columns, each
    with its PostgreSQL type (int8, int4, float8)."""

    model: type[Reading | ReadingHour | ReadingDay]
    columns: tuple[tuple[str, str], ...]

    @property
    def table(self) -> FromClause:
        return self.model.__table__

    @property
    def key(self) -> str:
        return self.columns[0][0]

    @functools.cached_property
    def record(self) -> np.dtype[Any]:
        """One row as PostgreSQL's binary send functions write it: big-endian, unpadded."""
        return np.dtype([(name, _PG_BINARY[kind]) for name, kind in self.columns])

    def _packed(
        self, system_id: ColumnElement[Any], outer: FromClause | None = None
    ) -> Select[tuple[bytes]]:
        """PostgreSQL: a system's rows of a range as one bytea, each row packed by its
        columns' binary send functions (NULL floats as NaN, which they become in the arrays
        anyway). numpy reads it as a record array, without a Python object per value:
        building a tuple per row, and arrays from those, cost several times the query on a
        year of quarter-hours.

        Aggregated over a subquery ordered by the time key (an index scan in that order),
        not with `string_agg(… ORDER BY key)`: PostgreSQL 15 sorts an ordered aggregate's
        input whatever order it arrives in — 50 instead of 14 ms for a year of
        quarter-hours. SQL does not promise the aggregate keeps the subquery's order, so
        `unpack` checks it. `outer`: the enclosing query's table `system_id` belongs to."""
        key = self.table.c[self.key]
        ordered = select(*(self.table.c[name] for name, _ in self.columns)).where(
            self.table.c.system_id == system_id,
            key >= bindparam("start"),
            key < bindparam("end"),
        )
        if outer is not None:
            ordered = ordered.correlate(outer)
        ordered_rows = ordered.order_by(key).subquery("r")
        fields = []
        for name, kind in self.columns:
            column: ColumnElement[Any] = ordered_rows.c[name]
            if kind == "float8":
                column = func.coalesce(column, literal_column("'NaN'::float8"))
            fields.append(getattr(func, f"{kind}send")(column))
        row = functools.reduce(lambda left, right: left.op("||")(right), fields)
        return select(func.string_agg(row, literal_column("''::bytea"), type_=LargeBinary()))

    @functools.cached_property
    def pg_range(self) -> DriverQuery:
        """A system's rows of a range, packed (PostgreSQL)."""
        return DriverQuery(self._packed(bindparam("id")))

    @functools.cached_property
    def pg_system_and_range(self) -> DriverQuery:
        """A system's columns and its rows of a range, packed, in one statement
        (PostgreSQL): no row at all when the system does not exist."""
        systems = System.__table__
        rows = self._packed(systems.c.id, outer=systems).scalar_subquery()
        return DriverQuery(select(*SYSTEM_COLUMNS, rows).where(systems.c.id == bindparam("id")))

    @functools.cached_property
    def sqlite_range(self) -> str:
        names = ", ".join(name for name, _ in self.columns)
        return (
            f"SELECT {names} FROM {self.model.__tablename__} "  # noqa: S608 - constants of this module
            f"WHERE system_id = ? AND {self.key} >= ? AND {self.key} < ? ORDER BY {self.key}"
        )

    def unpack(self, blob: bytes | None) -> list[npt.NDArray[Any]]:
        records = np.frombuffer(b"" if blob is None else blob, dtype=self.record)
        return in_time_order([records[name].astype(_NUMPY[kind]) for name, kind in self.columns])


def in_time_order(arrays: list[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    """Parallel columns (the first one the time key) sorted by time. An aggregate over an
    ordered subquery keeps that order in practice, but SQL does not promise it (a parallel
    plan could interleave): check, which is cheap, and sort only when it did not hold."""
    starts = arrays[0]
    if len(starts) > 1 and not bool(np.all(starts[1:] > starts[:-1])):
        order = np.argsort(starts, kind="stable")
        return [array[order] for array in arrays]
    return arrays


_PG_BINARY = {"int8": ">i8", "int4": ">i4", "float8": ">f8"}
_NUMPY: dict[str, type[np.generic]] = {"int8": np.int64, "int4": np.int64, "float8": np.float64}

RAW = Series(Reading, (("start_s", "int8"), ("energy_wh", "float8"), ("power_w", "float8")))
HOURS = Series(
    ReadingHour,
    (("hour_s", "int8"), ("energy_wh", "float8"), ("samples", "int4"), ("power_max_w", "float8")),
)
DAYS = Series(
    ReadingDay,
    (
        ("day_start_s", "int8"),
        ("energy_wh", "float8"),
        ("samples", "int4"),
        ("power_max_w", "float8"),
    ),
)


def _rows(series: Series, arrays: list[npt.NDArray[Any]]) -> Rows:
    if series is RAW:
        starts, energy, power = arrays
        return Rows(starts, energy, np.ones(len(starts), dtype=np.int64), power)
    starts, energy, samples, power_max = arrays
    return Rows(starts, energy, samples, power_max)


async def series_between(
    session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
) -> Rows:
    """A system's rows of `series` whose time key lies in [start_s, end_s), as arrays in
    time order (NULL floats as NaN), through the driver (`db.fetch_rows`: inside the
    session's transaction once it has one)."""
    if _dialect(session) == "postgresql":
        row = await series.pg_range.first(
            session, {"id": system_id, "start": start_s, "end": end_s}
        )
        assert row is not None  # an aggregate: always one row
        return _rows(series, series.unpack(row[0]))
    rows = await fetch_rows(session, series.sqlite_range, (system_id, start_s, end_s))
    # One conversion of the whole table (NULL → NaN); epoch seconds and counts are exact in
    # float64 (< 2**53).
    matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(series.columns))
    return _rows(
        series,
        [
            matrix[:, i].astype(_NUMPY[kind], copy=False)
            for i, (_, kind) in enumerate(series.columns)
        ],
    )


async def system_and_series(
    session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
) -> tuple[SystemRecord | None, Rows]:
    """The system (a frozen record, as `systems.repository.get_record`) and its rows of
    `series` in [start_s, end_s). On PostgreSQL one statement: one round trip instead of
    two, each of which costs this process ~0.2 ms of CPU inside a request. SQLite reads
    both on the event loop's own connection, where a read costs microseconds."""
    if _dialect(session) == "postgresql":
        row = await series.pg_system_and_range.first(
            session, {"id": system_id, "start": start_s, "end": end_s}
        )
        if row is None:
            return None, _rows(series, series.unpack(None))
        return record(row[:-1]), _rows(series, series.unpack(row[-1]))
    system = await get_record(session, system_id)
    if system is None:
        return None, _rows(series, series.unpack(None))
    return system, await series_between(session, series, system_id, start_s, end_s)


async def readings_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    """Raw quarter-hours with start in [start_s, end_s), in time order; samples = 1 each."""
    return await series_between(session, RAW, system_id, start_s, end_s)


async def days_between(session: AsyncSession, system_id: str, start_s: int, end_s: int) -> Rows:
    return await series_between(session, DAYS, system_id, start_s, end_s)


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


async def extend_reading_span(
    session: AsyncSession, system_id: str, first: datetime, last: datetime
) -> tuple[datetime, datetime]:
    """Widen the system's first/last reading to include [first, last] in one statement, so
    the stored span is exact whatever another upload did before this one took the lock;
    returns the span now stored."""
    statement = (
        update(System)
        .where(System.id == system_id)
        .values(
            first_reading_at=case(
                (
                    or_(System.first_reading_at.is_(None), System.first_reading_at > first),
                    literal(first, UtcDateTime()),
                ),
                else_=System.first_reading_at,
            ),
            last_reading_at=case(
                (
                    or_(System.last_reading_at.is_(None), System.last_reading_at < last),
                    literal(last, UtcDateTime()),
                ),
                else_=System.last_reading_at,
            ),
        )
        .returning(System.first_reading_at, System.last_reading_at)
        .execution_options(synchronize_session=False)
    )
    first_at, last_at = (await session.execute(statement)).one()
    # Both were just set wherever they were NULL.
    assert first_at is not None
    assert last_at is not None
    return first_at, last_at


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
