"""SQL for readings and their rollups. Time keys are epoch seconds; arrays go in and out.

What differs between the databases (range reads, bulk upserts) is behind
`ReadingStore` (`readings.store`), chosen here by the session's database backend; the queries below are the
same on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import case, delete, func, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.selectable import ScalarSelect

from solarapi.db import POSTGRESQL, SQLITE, session_backend
from solarapi.kit.grid import EnergySeries, FloatArray, IntArray
from solarapi.models.base import UtcDateTime
from solarapi.models.readings import Reading, ReadingDay
from solarapi.models.systems import System
from solarapi.readings.store import (
    DAYS,
    RAW,
    RAW_ENERGY,
    ChangeOwner,
    NewBatch,
    ReadingStore,
    Series,
    Upsert,
)
from solarapi.readings.store_postgres import PostgresReadingStore
from solarapi.readings.store_sqlite import SqliteReadingStore

_STORES: dict[str, ReadingStore] = {
    SQLITE.name: SqliteReadingStore(),
    POSTGRESQL.name: PostgresReadingStore(),
}


def reading_store(session: AsyncSession) -> ReadingStore:
    """The store of the session's database."""
    return _STORES[session_backend(session).name]


async def series_between(
    session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
) -> EnergySeries:
    return await reading_store(session).rows(session, series, system_id, start_s, end_s)


async def readings_between(
    session: AsyncSession, system_id: str, start_s: int, end_s: int
) -> EnergySeries:
    """Raw quarter-hours with start in [start_s, end_s), in time order; samples = 1 each."""
    return await series_between(session, RAW, system_id, start_s, end_s)


async def energy_between(
    session: AsyncSession, system_id: str, start_s: int, end_s: int
) -> EnergySeries:
    """`readings_between` without the power (NaN): the alert rules' read."""
    return await series_between(session, RAW_ENERGY, system_id, start_s, end_s)


async def days_between(
    session: AsyncSession, system_id: str, start_s: int, end_s: int
) -> EnergySeries:
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


async def latest_reading(
    session: AsyncSession, system_id: str, not_before_s: int | None = None
) -> tuple[int, float | None] | None:
    """The latest quarter-hour (start, power). `not_before_s` (the system's stored last reading)
    bounds the time key, so on PostgreSQL only the partition holding it is read, not every
    month's index."""
    query = select(Reading.start_s, Reading.power_w).where(Reading.system_id == system_id)
    if not_before_s is not None:
        query = query.where(Reading.start_s >= not_before_s)
    row = (await session.execute(query.order_by(Reading.start_s.desc()).limit(1))).first()
    return None if row is None else (int(row[0]), row[1])


async def latest_readings(
    session: AsyncSession, system_ids: Sequence[str], not_before_s: Sequence[int | None]
) -> list[tuple[int, float | None] | None]:
    """`latest_reading` of many systems in one statement, in the order of `system_ids`. A
    system's latest reading at or after its own bound is its latest reading if that is at or
    after the bound, else none: so the statement asks for each system's latest (one index
    descent per system), bounded (for PostgreSQL's partitions) only by the smallest bound,
    and each is checked against its own."""
    if not system_ids:
        return []
    conditions = [Reading.system_id == System.id]
    if all(bound is not None for bound in not_before_s):
        conditions.append(Reading.start_s >= min(b for b in not_before_s if b is not None))

    def newest(column: InstrumentedAttribute[Any]) -> ScalarSelect[Any]:
        return (
            select(column)
            .where(*conditions)
            .order_by(Reading.start_s.desc())
            .limit(1)
            .scalar_subquery()
        )

    rows = await session.execute(
        select(System.id, newest(Reading.start_s), newest(Reading.power_w)).where(
            System.id.in_(system_ids)
        )
    )
    found = {str(row[0]): (int(row[1]), row[2]) for row in rows if row[1] is not None}
    answers: list[tuple[int, float | None] | None] = []
    for system_id, bound in zip(system_ids, not_before_s, strict=True):
        one = found.get(system_id)
        answers.append(None if one is None or (bound is not None and one[0] < bound) else one)
    return answers


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


_READINGS = ("start_s", "energy_wh", "power_w", "batch")
_READING_TYPES = ("bigint", "double precision", "double precision", "bigint")
_ROLLUP_TYPES = ("bigint", "double precision", "integer", "double precision")


async def upsert_readings(
    session: AsyncSession,
    system_id: str,
    account_id: str,
    environment: str,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
    *,
    all_new: bool = False,
) -> None:
    """Insert or replace readings (power NaN = not reported = NULL) as one new batch of the
    change feed's log (`GET /readings/changes`) in the same transaction: the batch's row
    first, then the readings with its `seq` in `batch` (a replaced reading moves to it).
    `all_new` (the caller holds the system's lock and knows none exists) inserts without the
    conflict check, the dearest part of a large insert (figures in bench/readings/README.md)."""
    if not len(starts):
        return
    store = reading_store(session)
    batch = await store.open_batch(session, ChangeOwner(system_id, account_id, environment), starts)
    upsert = Upsert("readings", _READINGS, _READING_TYPES, "" if all_new else None)
    values = [starts.tolist(), energy_wh.tolist(), _nullable(power_w), [batch] * len(starts)]
    await store.upsert(session, upsert, system_id, values)


def stores_new_batches(session: AsyncSession) -> bool:
    """Whether `store_new` may write on the session's database, and now: outside a
    transaction (a failed statement would abort the session's)."""
    return reading_store(session).stores_new_batches and not session.in_transaction()


async def store_new(session: AsyncSession, batch: NewBatch) -> tuple[datetime, datetime] | None:
    """A batch of new quarter-hours and everything its upload writes, in one statement where
    the database has one (`ReadingStore.store_new`): the system's reading span as stored;
    None: nothing written."""
    return await reading_store(session).store_new(session, batch)


async def extend_reading_span(
    session: AsyncSession, system_id: str, first: datetime, last: datetime
) -> tuple[datetime, datetime]:
    """Widen the system's first/last reading to include [first, last] in one statement, so
    the stored span is exact whatever another upload did before this one took the lock, and
    raise its `data_version` (its readings changed); returns the span now stored."""
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
            data_version=System.data_version + 1,
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
    session: AsyncSession, system_id: str, rows: EnergySeries, *, add: bool = False
) -> None:
    """Store hourly rollup rows; `add` adds them to existing rows instead of replacing."""
    await _upsert_rollup(session, "reading_hours", "hour_s", system_id, rows, add)


async def upsert_days(
    session: AsyncSession, system_id: str, rows: EnergySeries, *, add: bool = False
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
    session: AsyncSession, table: str, key: str, system_id: str, rows: EnergySeries, add: bool
) -> None:
    columns = (key, "energy_wh", "samples", "power_max_w")
    upsert = Upsert(table, columns, _ROLLUP_TYPES, _additive(table) if add else None)
    values = [
        rows.starts.tolist(),
        rows.energy_wh.tolist(),
        rows.samples.tolist(),
        _nullable(rows.power_max_w),
    ]
    await reading_store(session).upsert(session, upsert, system_id, values)


async def delete_days(session: AsyncSession, system_id: str) -> None:
    await session.execute(delete(ReadingDay).where(ReadingDay.system_id == system_id))
