"""PostgreSQL (asyncpg): connections for one statement, and the PostgreSQL `Backend`."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import numpy as np
from sqlalchemy import Table, literal, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.util import greenlet_spawn

from solarapi.config import Settings
from solarapi.db.backend import (
    Backend,
    DatabaseVersions,
    LogPage,
    driver_connection,
    sync_engine_of,
)
from solarapi.dbfaults import DatabaseUnreachable, watch_connects

# The snapshot and the auth epoch in one statement: one round trip, one snapshot.
SNAPSHOT_SQL = "SELECT pg_current_snapshot()::text, (SELECT epoch FROM auth_epoch WHERE id = 1)"


@asynccontextmanager
async def pooled_connection(engine: Engine) -> AsyncIterator[Any]:
    """An asyncpg connection checked out of the engine's pool for one statement."""
    pooled = await greenlet_spawn(engine.raw_connection)
    connection = pooled.driver_connection
    assert connection is not None
    try:
        yield connection
    except BaseException as exc:
        await greenlet_spawn(_after_failure, pooled, connection, exc)
        raise
    finally:
        await greenlet_spawn(pooled.close)  # back to the pool (or closed, if invalidated)


async def lone_fetch(engine: Engine, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """The rows of one statement on a connection of the engine's pool that no transaction
    holds: one of the few this loop keeps checked out for such reads between them
    (`_LoneReaders`), else one checked out for this statement and given back after it.

    Why: the pool's checkout and return, in the greenlet they need (the pool may await: to
    connect, to wait, to close), cost this process ~35 µs of CPU per read on top of the
    statement's own — paid by every uncached read of the API (its system and rows, a page of
    the list) — where taking a kept connection from a list costs next to nothing."""
    readers = _LONE_READERS.get(engine)
    if readers is None or readers.loop is not asyncio.get_running_loop():
        if readers is not None:
            await readers.close()
        readers = _LONE_READERS[engine] = _LoneReaders(engine, asyncio.get_running_loop())
    return await readers.fetch(sql, params)


class _Held:
    """A pooled connection kept checked out on one event loop between reads: the version
    reads' (`version_fetch`) or a lone read's (`_LoneReaders`)."""

    __slots__ = ("connection", "loop", "pooled", "used")

    def __init__(self, pooled: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.pooled = pooled
        self.connection = pooled.driver_connection
        self.loop = loop
        self.used = time.monotonic()


_HELD: weakref.WeakKeyDictionary[Engine, _Held] = weakref.WeakKeyDictionary()
# A held connection unused this long goes back to the pool before the next read, which checks
# one out again (the pool's recycling then applies to it as to any other).
HELD_IDLE_S = 30.0


async def _return(held: _Held) -> None:
    """A held connection back to its pool (invalidated, if held on another loop: its
    connection belongs to that, perhaps closed, loop and cannot be used here)."""
    if held.loop is asyncio.get_running_loop():
        await greenlet_spawn(held.pooled.close)
        return
    with contextlib.suppress(Exception):  # the other loop may be gone: forgotten either way
        held.pooled.invalidate()


class _LoneReaders:
    """Connections of an engine's pool that one event loop keeps checked out between its lone
    reads (`lone_fetch`): a read takes the one used last, else checks one out, and puts it
    back unless `kept` are idle already (then it goes back to the pool). Whichever idles
    longest goes back to the pool once it has idled `HELD_IDLE_S`, when a read next comes (the
    pool's recycling then applies to it as to any other). At most a quarter of the pool, up
    to 4, so that a session's checkout never waits for connections idling here."""

    __slots__ = ("engine", "idle", "kept", "loop")

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.loop = loop
        size = getattr(engine.pool, "size", None)
        self.kept = min(4, size() // 4) if callable(size) else 0
        self.idle: list[_Held] = []  # the most recently used last

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        idle = self.idle
        if idle and time.monotonic() - idle[0].used > HELD_IDLE_S:
            await greenlet_spawn(idle.pop(0).pooled.close)
        if idle:
            held = idle.pop()
        else:
            held = _Held(await greenlet_spawn(self.engine.raw_connection), self.loop)
        try:
            rows: list[Any] = await held.connection.fetch(sql, *params)
        except BaseException as exc:
            if held.connection.is_closed():
                # The server closed it, so it closed the others of the time too: each goes
                # back to the pool to be replaced rather than fail a read of its own.
                others, idle[:] = idle[:], []
                await greenlet_spawn(_invalidate_all, others)
            await greenlet_spawn(_fail_and_return, held.pooled, held.connection, exc)
            raise
        held.used = time.monotonic()
        if len(idle) < self.kept:
            idle.append(held)
        else:
            await greenlet_spawn(held.pooled.close)
        return rows

    async def close(self) -> None:
        """Every idle connection back to the pool (`_return`)."""
        idle, self.idle = self.idle, []
        for held in idle:
            await _return(held)


_LONE_READERS: weakref.WeakKeyDictionary[Engine, _LoneReaders] = weakref.WeakKeyDictionary()


def _invalidate_all(held: list[_Held]) -> None:
    for each in held:
        each.pooled.invalidate()


async def version_fetch(engine: Engine, sql: str) -> list[Any]:
    """`lone_fetch` for the database version every API request reads (`read_version`), on a
    connection kept checked out for them between reads: the pool's checkout and return
    (with its rollback) and the greenlet around them cost as much CPU as the statement
    itself (~80 µs of ~150 µs per read; bench/fleet/README.md). One statement at a time per
    engine and loop (`db.version` serves each engine's reads one after another). A failed
    statement gives the connection back as `lone_fetch` would (invalidated when it may be
    unusable); one idle for `HELD_IDLE_S` goes back to the pool; `close_readers` returns it."""
    loop = asyncio.get_running_loop()
    held = _HELD.get(engine)
    if held is not None and (held.loop is not loop or time.monotonic() - held.used > HELD_IDLE_S):
        await _give_back(engine)
        held = None
    if held is None:
        held = _HELD[engine] = _Held(await greenlet_spawn(engine.raw_connection), loop)
    try:
        rows: list[Any] = await held.connection.fetch(sql)
    except BaseException as exc:
        if _HELD.get(engine) is held:
            del _HELD[engine]
        if held.connection.is_closed():
            # The server closed it, so it closed the pool's other connections of the time too:
            # each is replaced at its next checkout, as SQLAlchemy does when a statement run
            # through it finds its connection gone (before, every request's checkout here
            # met those dead connections in turn and dropped them; this one is not pooled).
            engine.pool._invalidate(held.pooled, exc, _checkin=False)
        await greenlet_spawn(_fail_and_return, held.pooled, held.connection, exc)
        raise
    held.used = time.monotonic()
    return rows


async def _give_back(engine: Engine) -> None:
    """The engine's held connection back to its pool (`_return`)."""
    held = _HELD.pop(engine, None)
    if held is not None:
        await _return(held)


def _fail_and_return(pooled: Any, connection: Any, exc: BaseException) -> None:
    try:
        _after_failure(pooled, connection, exc)
    finally:
        pooled.close()


def _after_failure(pooled: Any, connection: Any, exc: BaseException) -> None:
    """After a statement on a pooled connection failed (in a greenlet: invalidating may
    await). An error the server reported leaves the connection usable (no transaction is
    open), unless it closed it (a terminated backend); anything else — a lost connection, a
    cancellation mid-protocol — may have left it unusable."""
    closed = connection.is_closed()
    if closed or not isinstance(exc, asyncpg.PostgresError):
        pooled.invalidate()
    if closed and isinstance(exc, Exception):
        # asyncpg's "connection is closed" is a plain InterfaceError: say what it means.
        raise DatabaseUnreachable("the database closed the connection") from exc


@asynccontextmanager
async def pg_reader(session: AsyncSession) -> AsyncIterator[Any]:
    """The asyncpg connection for one read: the session's own once it has begun a
    transaction (the read must see its writes); before that, a connection checked out of the
    engine's pool for this one statement, which the session never learns about.

    Why: a read-only request never needs the session's transaction — each statement alone
    reads the last committed state, as it would as the transaction's first statement under
    READ COMMITTED. Checking a connection out of the pool and back costs ~12 µs of CPU;
    beginning, committing and closing the session around the same reads ~165 µs (measured
    with two primary-key lookups). One connection per statement, so a request never holds
    two: a later write begins the session's own."""
    if session.get_transaction() is not None:
        yield await driver_connection(session)
        return
    async with pooled_connection(sync_engine_of(session)) as connection:
        yield connection


class PostgresBackend(Backend):
    name = "postgresql"
    batch_migrations = False
    projects_skipped_rows = True

    def create_engine(self, settings: Settings, *, pooled: bool) -> AsyncEngine:
        # asyncpg waits 60 s for a connection by default: an unreachable (not refusing)
        # database would hold every request, or an operator's command, that long before its
        # one-line error. A command (migrations included) waits a little longer than a request.
        if not pooled:
            return create_async_engine(
                settings.async_database_url, poolclass=NullPool, connect_args={"timeout": 10}
            )
        engine = create_async_engine(
            settings.async_database_url,
            connect_args={"timeout": 5},
            pool_size=settings.db_pool_size,
            pool_timeout=settings.db_pool_timeout,
            max_overflow=10,
            # Last in, first out: a lightly loaded process keeps reusing its warmest
            # connections (asyncpg prepares each statement once per connection) instead of
            # cycling through all of them, and the rest can idle.
            pool_use_lifo=True,
            pool_pre_ping=False,
            pool_recycle=1800,
        )
        watch_connects(engine)
        return engine

    async def fetch_rows(
        self, session: AsyncSession, sql: str, params: Sequence[Any]
    ) -> Sequence[Any]:
        # `pg_reader`'s connection, without its two context managers around the hot reads.
        if session.get_transaction() is not None:
            connection = await driver_connection(session)
            return await connection.fetch(sql, *params)  # type: ignore[no-any-return]
        return await lone_fetch(sync_engine_of(session), sql, params)

    async def lone_read(self, engine: AsyncEngine, sql: str) -> list[Any]:
        return await lone_fetch(engine.sync_engine, sql)

    async def read_version(self, engine: Engine, engine_number: int) -> DatabaseVersions | None:
        # The server's snapshot says nothing of which server: told apart by the engine's number.
        ((snapshot, epoch),) = await version_fetch(engine, SNAPSHOT_SQL)
        return DatabaseVersions((engine_number, str(snapshot)), (engine_number, int(epoch)))

    async def result_type_codes(
        self, session: AsyncSession, sql: str, column_count: int
    ) -> list[Any]:
        # asyncpg's result processors need the column type ids: from the prepared statement,
        # which asyncpg caches per connection.
        async with pg_reader(session) as connection:
            prepared = await connection.prepare(sql)
            return [attribute.type.oid for attribute in prepared.get_attributes()]

    async def lock_row(
        self, session: AsyncSession, table: Table, key: str, value: Any, *, touch: str
    ) -> None:
        await session.execute(
            select(literal(1)).select_from(table).where(table.c[key] == value).with_for_update()
        )

    async def hold_lock(self, session: AsyncSession, name: str, table: Table) -> None:
        # A transaction-level advisory lock: it touches no row, so it blocks nobody else.
        await session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"), {"name": name}
        )

    async def commit_without_flush_wait(self, session: AsyncSession) -> None:
        await session.execute(text("SET LOCAL synchronous_commit TO OFF"))

    async def read_change_log(
        self,
        session: AsyncSession,
        *,
        account_id: str,
        environment: str,
        after: tuple[int, int, int],
        limit: int,
    ) -> LogPage:
        async with pg_reader(session) as connection:
            # JIT off for this statement (its transaction): the planner cannot know a
            # batch's rows and costs a page far above `jit_above_cost`; JIT then took 981 of
            # a page's 1,369 ms (docs/scaling.md). One row more than the page says whether
            # it is full.
            params = (account_id, environment, *after, limit + 1)
            if connection.is_in_transaction():
                await connection.execute(_NO_JIT)
                row = await connection.fetchrow(_CHANGE_LOG, *params)
            else:
                async with connection.transaction(readonly=True):
                    await connection.execute(_NO_JIT)
                    row = await connection.fetchrow(_CHANGE_LOG, *params)
        records = np.frombuffer(b"" if row[0] is None else row[0], dtype=_LOG_RECORD)
        txid, seq = records["txid"].astype(np.int64), records["seq"].astype(np.int64)
        start = records["start_s"].astype(np.int64)
        if len(records) > 1 and not bool(
            np.all(
                (txid[1:] > txid[:-1])
                | ((txid[1:] == txid[:-1]) & (seq[1:] > seq[:-1]))
                | ((txid[1:] == txid[:-1]) & (seq[1:] == seq[:-1]) & (start[1:] > start[:-1]))
            )
        ):
            # SQL does not promise that an aggregate keeps its input's order: checked (cheap)
            # and sorted only when it did not hold.
            records = records[np.lexsort((start, seq, txid))]
        full = len(records) > limit
        records = records[:limit]
        txid, seq = records["txid"].astype(np.int64), records["seq"].astype(np.int64)
        start = records["start_s"].astype(np.int64)
        last = (int(txid[-1]), int(seq[-1]), int(start[-1])) if len(records) else None
        return LogPage(
            system_ids=records["system_id"].tolist(),
            starts=start,
            energy_wh=records["energy_wh"].astype(np.float64),
            power_w=records["power_w"].astype(np.float64),
            last=last,
            more=full or bool(row[1]),
        )

    async def close_readers(self, engine: AsyncEngine) -> None:
        await _give_back(engine.sync_engine)  # the version reads' connection
        readers = _LONE_READERS.pop(engine.sync_engine, None)
        if readers is not None:
            await readers.close()


_NO_JIT = "SET LOCAL jit = off"

# The change feed's page (`read_change_log`), one statement, so one snapshot: the batches after
# ($3, $4) whose writer's transaction id is below the snapshot's xmin (ordered by txid, those
# are a prefix of the batches after the position), in (txid, seq) order by the feed index,
# each batch's rows from `readings` by the primary key's range (`system_id`, `lo_s`..`hi_s`),
# those whose `batch` is still the batch's `seq` (in the position's own batch only those after
# $5), up to $6 rows, packed as one `bytea` of fixed-size records (the system id NUL-padded to
# 40 bytes, big-endian numbers, a NULL power as NaN); and whether the snapshot holds a batch
# with rows at or above the horizon (held back until older writers end; its index range
# starts at the horizon, not at the position: a row comparison beside it made PostgreSQL scan
# the index from the position, 116 ms on a 744,000-batch log). Rows below the horizon after
# the page: the page is full ($6 is one more than asked for).
_AFTER_POSITION = (
    "r.system_id = b.system_id AND r.start_s >= b.lo_s AND r.start_s <= b.hi_s"
    " AND r.start_s > CASE WHEN b.txid = $3 AND b.seq = $4 THEN $5::bigint ELSE b.lo_s - 1 END"
    " AND r.batch = b.seq"
)
_HORIZON = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_CHANGE_LOG = f"""
WITH page AS MATERIALIZED (
    SELECT b.system_id, r.start_s, r.energy_wh, r.power_w, b.txid, b.seq
    FROM change_batches b CROSS JOIN LATERAL (
        SELECT r.start_s, r.energy_wh, r.power_w FROM readings r
        WHERE {_AFTER_POSITION} ORDER BY r.start_s
    ) r
    WHERE b.account_id = $1 AND b.environment = $2
      AND (b.txid, b.seq) >= ($3::bigint, $4::bigint) AND b.txid < {_HORIZON}
    ORDER BY b.txid, b.seq, r.start_s LIMIT $6
)
SELECT
    (SELECT string_agg(
        convert_to(system_id, 'UTF8')
            || decode(repeat('00', 40 - octet_length(system_id)), 'hex')
            || int8send(start_s) || float8send(energy_wh)
            || float8send(coalesce(power_w, 'NaN'::float8)) || int8send(txid) || int8send(seq),
        ''::bytea) FROM page),
    EXISTS (
        SELECT 1 FROM change_batches b
        WHERE b.account_id = $1 AND b.environment = $2
          AND b.txid >= greatest($3::bigint, {_HORIZON})
          AND (b.txid > $3::bigint OR b.seq >= $4::bigint)
          AND EXISTS (SELECT 1 FROM readings r WHERE {_AFTER_POSITION})
    )
"""  # noqa: S608 - constants
_LOG_RECORD = np.dtype(
    [
        ("system_id", "S40"),
        ("start_s", ">i8"),
        ("energy_wh", ">f8"),
        ("power_w", ">f8"),
        ("txid", ">i8"),
        ("seq", ">i8"),
    ]
)

POSTGRESQL = PostgresBackend()
