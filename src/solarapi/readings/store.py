"""The storage interface of readings (`ReadingStore`) and the values it reads and writes,
in epoch seconds and numpy arrays: the three tables read by range (`RAW` quarter-hours, the
`HOURS` and `DAYS` rollups; each a `Series`, read as a `kit.grid.EnergySeries`), upserts,
a batch of new quarter-hours written in one statement (`NewBatch`) and whose change-log
entries a write makes (`ChangeOwner`). One implementation per database (`store_sqlite`,
`store_postgres`), each using that database's fastest path; `repository.reading_store` picks
the one of the session's backend (`db.session_backend`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.events.types import PreparedEvent
from solarapi.jobs.queue import PreparedJob
from solarapi.kit.grid import EnergySeries, FloatArray, IntArray
from solarapi.models.readings import Reading, ReadingDay, ReadingHour
from solarapi.systems.repository import SystemHead

# The arrays' type of each column type.
NUMPY_TYPES: dict[str, type[np.generic]] = {
    "int8": np.int64,
    "int4": np.int64,
    "float8": np.float64,
}


@dataclass(frozen=True, eq=False)
class Series:
    """A time-series table read by range: its time key first, then the value columns, each
    with its PostgreSQL type (int8, int4, float8). Raw readings have no `samples` column
    (each is one sample) and call their power `power_w`.

    The module's constants below are the only ones, compared and hashed by identity (the
    stores' statements are cached per series): a dataclass's own hash is a Python function
    hashing its nested tuples on every look-up, several per read."""

    model: type[Reading | ReadingHour | ReadingDay]
    columns: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return str(self.model.__tablename__)

    @property
    def key(self) -> str:
        return self.columns[0][0]

    def rows(self, arrays: list[npt.NDArray[Any]]) -> EnergySeries:
        """The table's rows (NULL floats as NaN) from the columns' arrays, in the order of
        `columns`."""
        if len(arrays) == 2:  # RAW_ENERGY: power not read (NaN)
            starts, energy = arrays
            return EnergySeries(
                starts, energy, np.ones(len(starts), dtype=np.int64), np.full(len(starts), np.nan)
            )
        if len(arrays) == 3:
            starts, energy, power = arrays
            return EnergySeries(starts, energy, np.ones(len(starts), dtype=np.int64), power)
        starts, energy, samples, power_max = arrays
        return EnergySeries(starts, energy, samples, power_max)

    def empty(self) -> EnergySeries:
        return self.rows([np.empty(0, dtype=NUMPY_TYPES[kind]) for _, kind in self.columns])


RAW = Series(Reading, (("start_s", "int8"), ("energy_wh", "float8"), ("power_w", "float8")))
# The raw readings' energy alone, for readers that use no power (the alert rules): a third
# fewer values handed over by the driver (on SQLite each one a Python object first).
RAW_ENERGY = Series(Reading, (("start_s", "int8"), ("energy_wh", "float8")))
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


@dataclass(frozen=True, slots=True)
class Upsert:
    """An `INSERT … ON CONFLICT (system_id, <first column>) DO UPDATE` of column lists.
    `updates`: the SET clause; None = replace every column; "" = a plain INSERT (the caller
    knows no row exists). Table and column names are constants of this package, never
    client input."""

    table: str
    columns: tuple[str, ...]
    pg_types: tuple[str, ...]
    updates: str | None = None

    def conflict_clause(self) -> str:
        key, *rest = self.columns
        updates = self.updates
        if updates is None:
            updates = ", ".join(f"{column} = excluded.{column}" for column in rest)
        return f"ON CONFLICT (system_id, {key}) DO UPDATE SET {updates}" if updates else ""


@dataclass(frozen=True, slots=True)
class ChangeOwner:
    """Whose readings a change-log write is about."""

    system_id: str
    account_id: str
    environment: str


@dataclass(frozen=True, slots=True)
class NewBatch:
    """Everything an upload of quarter-hours none of which is stored yet writes, computed
    against the system as read before its lock (`timezone`, `capacity_kwp`: the rollups were
    bucketed and the batch validated with them): the readings (power NaN = not reported),
    the sums to add to the hourly and local-daily rollups, the system's new reading span,
    the `readings.uploaded` event with its webhook deliveries, and the alert evaluation."""

    system_id: str
    account_id: str
    environment: str
    timezone: str
    capacity_kwp: float
    starts: IntArray
    energy_wh: FloatArray
    power_w: FloatArray
    hours: EnergySeries
    days: EnergySeries
    first: datetime
    last: datetime
    event: PreparedEvent
    alert_job: PreparedJob
    # The system's last reading, as read, starts before the batch's first: the batch is new
    # whole if that still holds under the lock (the statement checks), without looking.
    after_last_reading: bool = False


class ReadingStore(Protocol):
    """Range reads and bulk writes of readings and their rollups."""

    # Whether `store_new` can ever write (else the caller need not prepare a `NewBatch`).
    stores_new_batches: bool

    async def rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> EnergySeries:
        """A system's rows of `series` whose time key lies in [start_s, end_s), in time
        order, inside the session's transaction once it has one."""
        ...

    async def system_and_rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> tuple[SystemHead | None, EnergySeries]:
        """The system's head (None when there is none) and its rows as `rows` gives them, in
        as few round trips as the database allows, read together where it can (one
        statement: one snapshot) — on SQLite the packed rollups' chunks; raw quarter-hours
        after the head (a join would repeat the head's strings on every row)."""
        ...

    async def system_head(self, session: AsyncSession, system_id: str) -> SystemHead | None:
        """The system's head (None when there is none), its columns as stored."""
        ...

    async def rows_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, EnergySeries]:
        """The rows of `series` in [start_s, end_s) of every system of `system_ids`, read in
        one statement, sorted by (system, time): with each row's owner, its system's place in
        `system_ids` (the portfolio reads)."""
        ...

    async def upsert(
        self, session: AsyncSession, upsert: Upsert, system_id: str, values: list[list[Any]]
    ) -> None:
        """Write `values` (one list per column of `upsert.columns`) for the system."""
        ...

    async def store_new(
        self, session: AsyncSession, batch: NewBatch
    ) -> tuple[datetime, datetime] | None:
        """Write `batch` as one atomic statement, committed when it returns, with the
        system's lock taken inside it, and give the system's reading span as now stored;
        None, having written nothing, when the statement
        cannot do it all: the session has a transaction open, the database has no such
        statement, a quarter-hour is stored already, the system changed (or went) since it
        was read, or the account has more subscribed webhook endpoints than the event has
        delivery ids. The caller then takes the general way (lock, upsert, rollups)."""
        ...

    async def open_batch(self, session: AsyncSession, change: ChangeOwner, starts: IntArray) -> int:
        """Enter a write of the system's readings at `starts` (not empty) in the change
        feed's log as one new batch, in the caller's transaction, before the readings' own
        write, which must give each of them `batch` = the `seq` returned: a new position
        (on PostgreSQL with the writer's transaction id; one batch row per UTC month
        touched, `month_spans`)."""
        ...


def month_spans(starts: IntArray) -> tuple[list[int], list[int]]:
    """The first and last of `starts` (not empty) within each UTC month they touch, in
    month order: a batch's rows per month (PostgreSQL partitions `change_batches` by month,
    and a batch's range is read whole, so a write of two quarter-hours months apart must not
    span the months between). The usual write, within one month, is told without numpy."""
    lo, hi = int(starts.min()), int(starts.max())
    if time.gmtime(lo)[:2] == time.gmtime(hi)[:2]:
        return [lo], [hi]
    ordered = np.sort(starts)
    months = ordered.astype("datetime64[s]").astype("datetime64[M]")
    firsts = np.flatnonzero(np.r_[True, months[1:] != months[:-1]])
    lasts = np.r_[firsts[1:] - 1, len(ordered) - 1]
    return ordered[firsts].tolist(), ordered[lasts].tolist()


def in_time_order(arrays: list[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    """Parallel columns (the first one the time key) sorted by time. An aggregate over an
    ordered subquery keeps that order in practice, but SQL does not promise it (a parallel
    plan could interleave): check, which is cheap, and sort only when it did not hold."""
    starts = arrays[0]
    # (A bool count, not `np.all`: a reduction's dispatch costs more than the check itself.)
    if len(starts) > 1 and np.count_nonzero(starts[1:] > starts[:-1]) != len(starts) - 1:
        order = np.argsort(starts, kind="stable")
        return [array[order] for array in arrays]
    return arrays


def in_owner_order(
    owners: IntArray, arrays: list[npt.NDArray[Any]]
) -> tuple[IntArray, list[npt.NDArray[Any]]]:
    """`in_time_order` for the rows of many systems: sorted by (owner, time key), checked
    first and sorted only when the database's order did not hold."""
    starts = arrays[0]
    if len(starts) > 1:
        same = owners[1:] == owners[:-1]
        ordered = (owners[1:] > owners[:-1]) | (same & (starts[1:] > starts[:-1]))
        if not bool(np.all(ordered)):
            order = np.lexsort((starts, owners))
            return owners[order], [array[order] for array in arrays]
    return owners, arrays
