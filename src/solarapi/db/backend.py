"""What SQLite and PostgreSQL do differently, as one interface with two implementations.

`engine.backend_of` gives the engine's `Backend`, chosen once when the engine is made; every
caller above this package (repositories, stores, the gateway) asks it instead of looking at
the dialect, so none of them branches on the database.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Table
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from solarapi.config import Settings

# A version of the database (`committed_version`): (a number of the reader or engine that
# read it, unique in the process; SQLite's `data_version` or PostgreSQL's snapshot).
CommittedVersion = tuple[int, int | str]


class DatabaseVersions(NamedTuple):
    """What `committed_version` reads, in one statement (so one snapshot): `data`, which
    changes with every commit, and `auth`, which changes only with the commits that change
    an API key or an account (the auth epoch, migration 0020), each with the number of the
    reader or engine that read it."""

    data: CommittedVersion
    auth: CommittedVersion


# Numbers of the readers and engines a version is read from, unique in the process.
version_sources = itertools.count(1)


@dataclass(frozen=True, slots=True)
class LogPage:
    """A page of the change feed (`change_batches` and their rows in `readings`,
    docs/changes.md) as columns, in (`txid`, `seq`, `start_s`) order: only rows that may be
    delivered (of batches below the reading snapshot's horizon), at most the `limit` asked
    for. `last`: the position (`txid`, `seq`, `start_s`) of the last row (its batch's and its
    own), None when there is none; `more`: whether the snapshot held any row after the last
    delivered position (a full page, or rows held back until an older writer ends)."""

    system_ids: list[bytes]
    starts: npt.NDArray[np.int64]
    energy_wh: npt.NDArray[np.float64]
    power_w: npt.NDArray[np.float64]  # NaN: not reported
    last: tuple[int, int, int] | None
    more: bool


class Backend(ABC):
    """One database's way of doing the few things that differ between SQLite and PostgreSQL."""

    name: str
    # Alembic's batch mode (copy-and-move tables): SQLite cannot ALTER most of a table.
    batch_migrations: bool
    # Whether a query's select list is computed for the rows its OFFSET skips (PostgreSQL's
    # scan projects every row it hands the LIMIT above it; SQLite skips a row before
    # computing its columns): a paged read then picks the page's keys first and reads and
    # formats only the page's rows (`systems.repository._page_query`).
    projects_skipped_rows: bool

    @abstractmethod
    def create_engine(self, settings: Settings, *, pooled: bool) -> AsyncEngine:
        """The engine for `settings`: pooled for a serving process, or one connection per
        use (`pooled=False`) for CLI commands and migrations."""

    @abstractmethod
    async def fetch_rows(
        self, session: AsyncSession, sql: str, params: Sequence[Any]
    ) -> Sequence[Any]:
        """Rows of a read through the driver, `sql` in the driver's parameter style, seeing
        what the session would see."""

    @abstractmethod
    async def lone_read(self, engine: AsyncEngine, sql: str) -> list[Any]:
        """Rows of one statement outside any session."""

    @abstractmethod
    async def read_version(self, engine: Engine, engine_number: int) -> DatabaseVersions | None:
        """The database's `committed_version` now (None where it has none)."""

    # `read_version` without an await, where the backend reads it in this process (SQLite):
    # `committed_version` then serves a batch from a plain callback, not a task. None: not.
    read_version_now: Callable[[Engine, int], DatabaseVersions | None] | None = None

    @abstractmethod
    async def result_type_codes(
        self, session: AsyncSession, sql: str, column_count: int
    ) -> list[Any]:
        """What the driver reports of each result column's type, as SQLAlchemy's result
        processors take it (`DriverQuery`)."""

    @abstractmethod
    async def lock_row(
        self, session: AsyncSession, table: Table, key: str, value: Any, *, touch: str
    ) -> None:
        """Hold the row of `table` whose column `key` is `value` for the rest of the session's
        transaction, so a second writer that asks for it waits (`touch`: a column of the row
        that is no key, for a database that can only lock by writing)."""

    @abstractmethod
    async def hold_lock(self, session: AsyncSession, name: str, table: Table) -> None:
        """Hold the lock called `name` for the rest of the session's transaction, so another
        transaction that asks for it waits until this one ends, and whatever this one reads
        after it is what the last holder committed: a count checked before an insert (a
        quota, a cap) stays true until the commit. `table`: any table of the schema, for a
        database that can only lock by writing (the whole database then, not the name)."""

    @abstractmethod
    async def commit_without_flush_wait(self, session: AsyncSession) -> None:
        """Let the session's transaction commit without waiting for its log to reach the disk
        (where the database allows it): for bookkeeping a later synchronous commit makes
        durable anyway."""

    @abstractmethod
    async def read_change_log(
        self,
        session: AsyncSession,
        *,
        account_id: str,
        environment: str,
        after: tuple[int, int, int],
        limit: int,
    ) -> LogPage:
        """Up to `limit` rows of the environment's change log after the position `after`
        (`txid`, `seq`, `start_s`),
        read in one statement (one snapshot), only those that may be delivered: every row
        below the snapshot's horizon on PostgreSQL (`txid` under its xmin: every writer
        below it has ended, every later one gets a larger id); every row on SQLite, whose
        writers are serialised and take `seq` values in commit order."""

    @abstractmethod
    async def close_readers(self, engine: AsyncEngine) -> None:
        """Close whatever the backend opened for the engine beside its pool."""


async def driver_connection(session: AsyncSession) -> Any:
    """The driver's own connection (aiosqlite or asyncpg) under the session's connection, so
    inside whatever transaction the session has begun."""
    connection = await session.connection()
    raw = (await connection.get_raw_connection()).driver_connection
    assert raw is not None
    return raw


def sync_engine_of(session: AsyncSession) -> Engine:
    engine = session.get_bind()
    assert isinstance(engine, Engine)  # sessions here are bound to engines, not connections
    return engine
