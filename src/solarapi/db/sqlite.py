"""SQLite: the aiosqlite dialect without idle hand-overs, the event loop's own readers, and
the SQLite `Backend`."""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Table, delete, event, false, update
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from solarapi.config import Settings
from solarapi.db.backend import (
    Backend,
    DatabaseVersions,
    LogPage,
    driver_connection,
    sync_engine_of,
    version_sources,
)
from solarapi.dbfaults import watch_connects


class SQLiteDialect(SQLiteDialect_aiosqlite):
    """aiosqlite without the hand-overs that do nothing.

    Outside a transaction SQLite's commit and rollback do nothing (the sqlite3 module checks
    the same `in_transaction` flag and returns), but through aiosqlite each one still costs
    a hand-over to the connection's thread and back (~100 µs of CPU): two per read-only
    request — the session's commit and the pool's rollback on return. The flag is read
    directly; nothing else runs on the connection at that moment."""

    supports_statement_cache = True  # nothing here changes how SQL is compiled

    @staticmethod
    def _in_transaction(dbapi_connection: Any) -> bool:
        try:
            return bool(dbapi_connection.driver_connection.in_transaction)
        except ValueError:  # closed: the adapter's own commit/rollback knows what to do
            return True

    def do_commit(self, dbapi_connection: Any) -> None:
        if self._in_transaction(dbapi_connection):
            super().do_commit(dbapi_connection)  # type: ignore[no-untyped-call]

    def do_rollback(self, dbapi_connection: Any) -> None:
        if self._in_transaction(dbapi_connection):
            super().do_rollback(dbapi_connection)  # type: ignore[no-untyped-call]


registry.register("sqlite.solarapi", __name__, "SQLiteDialect")


def _sqlite_url(settings: Settings) -> URL:
    return make_url(settings.async_database_url).set(drivername="sqlite+solarapi")


def _ensure_sqlite_dir(settings: Settings) -> None:
    db_path = settings.database_url.split("///", 1)[-1]
    if db_path and db_path != ":memory:":
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # WAL lets readers run beside the single writer; busy_timeout makes writers queue
        # instead of failing with "database is locked"; foreign keys are off by default.
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


class _Reader(sqlite3.Connection):
    """An event-loop reader. Each has a number of its own for the process's lifetime, so a
    `committed_version` of a closed reader is never taken for one of a later reader (of
    another database) whose `data_version` count started over."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.number = next(version_sources)
        # The versions last read (data_version and the auth epoch, read together): the
        # epoch holds while the data version does (no commit of any connection in between),
        # and so does the one `DatabaseVersions` handed to every caller until then.
        self.versions: DatabaseVersions | None = None


# Per engine: the read-only sqlite3 connection of each thread that reads on its own (the
# event loop's; one per loop, used only between its awaits, so never by two tasks at once).
_READERS: weakref.WeakKeyDictionary[Any, dict[int, _Reader]] = weakref.WeakKeyDictionary()
# The reader handed out last (its engine, weakly; its thread): a serving process reads one
# engine on one loop, and finds it here without `_READERS`' look-up, which makes a weak
# reference of the engine each time (every API request reads the version, an uncached read
# its rows too). Forgotten by `close_readers`.
_last_reader: tuple[weakref.ref[Any], int, _Reader] | None = None


def loop_reader(engine: Engine) -> _Reader | None:
    global _last_reader
    last = _last_reader
    if last is not None and last[0]() is engine and last[1] == threading.get_ident():
        return last[2]
    path = engine.url.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return None  # another connection would not see the same database
    readers = _READERS.setdefault(engine, {})
    connection = readers.get(threading.get_ident())
    if connection is None:
        # check_same_thread off only so that dispose_engine can close it from any thread.
        connection = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, factory=_Reader
        )
        # Never waits for a lock on the event loop: a busy database sends the read through
        # aiosqlite instead (in WAL mode a reader is refused only while the WAL is recovered).
        connection.execute("PRAGMA busy_timeout=0")
        connection.execute("PRAGMA query_only=ON")
        readers[threading.get_ident()] = connection
    _last_reader = (weakref.ref(engine), threading.get_ident(), connection)
    return connection


def _read_on_loop(engine: Engine, sql: str, params: Sequence[Any]) -> list[Any] | None:
    """The rows from the event loop's own reader, or None when it cannot read now (an
    in-memory database, or a busy one): the caller reads through aiosqlite instead."""
    reader = loop_reader(engine)
    if reader is None:
        return None
    try:
        return reader.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        # By result code, never by message (extended codes keep the primary in the low byte).
        if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise
    return None


async def sqlite_fetchall(session: AsyncSession, sql: str, params: Sequence[Any]) -> list[Any]:
    """Rows of a read on SQLite, on the event loop's own thread when that sees exactly what
    the session would: outside a write transaction the session's connection reads the last
    committed state, and so does any other connection (WAL: readers never wait for the
    writer). Inside the session's write transaction (it must see its own writes), for an
    in-memory database, and when the database is busy, through the session's aiosqlite
    connection.

    Why: SQLite is a library in this process, not a server. A primary-key lookup costs 4 µs
    of CPU in sqlite3 and 70-200 µs as a hand-over to aiosqlite's thread and back (a queue,
    a thread wake-up, the GIL, the loop's self-pipe), so three reads per API request spent
    more in hand-overs than in SQLite. Reads that hold the GIL in sqlite3 (building the row
    tuples) block the loop as long on either thread; the reads sent here are index range
    scans bounded by the endpoints' range caps (at most a year of quarter-hours)."""
    if not await _in_write_transaction(session):
        rows = _read_on_loop(sync_engine_of(session), sql, params)
        if rows is not None:
            return rows
    raw = await driver_connection(session)
    return list(await raw.execute_fetchall(sql, params))


async def _in_write_transaction(session: AsyncSession) -> bool:
    if session.get_transaction() is None:
        return False  # no connection checked out, so nothing of its own to see
    return bool((await driver_connection(session)).in_transaction)


class SQLiteBackend(Backend):
    name = "sqlite"
    batch_migrations = True
    projects_skipped_rows = False

    def create_engine(self, settings: Settings, *, pooled: bool) -> AsyncEngine:
        _ensure_sqlite_dir(settings)
        if not pooled:
            engine = create_async_engine(_sqlite_url(settings), poolclass=NullPool)
            _configure_sqlite(engine)
            return engine
        engine = create_async_engine(
            _sqlite_url(settings),
            connect_args={"timeout": 30},
            pool_size=settings.db_pool_size,
            pool_timeout=settings.db_pool_timeout,
            max_overflow=10,
            pool_use_lifo=True,
        )
        _configure_sqlite(engine)
        watch_connects(engine)
        return engine

    async def fetch_rows(
        self, session: AsyncSession, sql: str, params: Sequence[Any]
    ) -> Sequence[Any]:
        return await sqlite_fetchall(session, sql, params)

    async def lone_read(self, engine: AsyncEngine, sql: str) -> list[Any]:
        rows = _read_on_loop(engine.sync_engine, sql, ())
        if rows is not None:
            return rows
        async with engine.connect() as connection:  # in memory, or busy: through aiosqlite
            return list((await connection.exec_driver_sql(sql)).all())

    async def read_version(self, engine: Engine, engine_number: int) -> DatabaseVersions | None:
        return self.read_version_now(engine, engine_number)

    def read_version_now(self, engine: Engine, engine_number: int) -> DatabaseVersions | None:
        # `PRAGMA data_version` on the event loop's reader (~4 µs: it compares the WAL index
        # header; a commit of any other connection changes it — the reader itself never
        # writes). The auth epoch's row is read only when that moved, with the data version
        # in one statement (one read transaction, ended by `fetchall`): an unchanged data
        # version means no commit, so the epoch read with it still holds.
        reader = loop_reader(engine)
        if reader is None:
            return None
        try:
            (data_version,) = reader.execute("PRAGMA data_version").fetchone()
            kept = reader.versions
            if kept is None or kept[0][1] != data_version:
                ((data_version, epoch),) = reader.execute(VERSION_SQL).fetchall()
                number = reader.number
                kept = reader.versions = DatabaseVersions(
                    (number, int(data_version)), (number, int(epoch))
                )
        except sqlite3.OperationalError:
            return None
        return kept

    async def result_type_codes(
        self, session: AsyncSession, sql: str, column_count: int
    ) -> list[Any]:
        return [None] * column_count  # SQLite reports no column types

    async def lock_row(
        self, session: AsyncSession, table: Table, key: str, value: Any, *, touch: str
    ) -> None:
        # No row locks: a no-op write (`touch` set to itself) starts the transaction and takes
        # the database's write lock now instead of at the first real write, so a second writer
        # waits on busy_timeout.
        await session.execute(
            update(table).where(table.c[key] == value).values({touch: table.c[touch]})
        )

    async def hold_lock(self, session: AsyncSession, name: str, table: Table) -> None:
        # A write that changes nothing still starts the transaction and takes the database's
        # one write lock now (the sqlite3 module begins a transaction only before a write, so
        # the reads before it were each on their own), and a second writer waits on
        # busy_timeout: every name shares that one lock.
        await session.execute(delete(table).where(false()))

    async def commit_without_flush_wait(self, session: AsyncSession) -> None:
        pass  # synchronous=NORMAL in WAL mode already commits without an fsync

    async def read_change_log(
        self,
        session: AsyncSession,
        *,
        account_id: str,
        environment: str,
        after: tuple[int, int, int],
        limit: int,
    ) -> LogPage:
        # No horizon: every row may be delivered. One row more than the page tells whether
        # anything follows it. (`txid` is always 0 here: equal to it, so the index range
        # starts at `seq` instead of at the first row of the environment.)
        txid, seq, start_s = after
        rows = await sqlite_fetchall(
            session,
            _CHANGE_LOG,
            (account_id, environment, txid, seq, seq, start_s, limit + 1),
        )
        more = len(rows) > limit
        rows = rows[:limit]
        if not rows:
            empty = np.zeros(0)
            return LogPage([], empty.astype(np.int64), empty, empty, None, more)
        system_ids, starts, energy, power, txids, seqs = zip(*rows, strict=True)
        return LogPage(
            system_ids=[system_id.encode() for system_id in system_ids],
            starts=np.array(starts, dtype=np.int64),
            energy_wh=np.array(energy, dtype=np.float64),
            power_w=np.array(power, dtype=np.float64),  # None → NaN
            last=(int(txids[-1]), int(seqs[-1]), int(starts[-1])),
            more=more,
        )

    async def close_readers(self, engine: AsyncEngine) -> None:
        global _last_reader
        _last_reader = None
        for connection in _READERS.pop(engine.sync_engine, {}).values():
            connection.close()


# `committed_version`: the connection's data version and the auth epoch (migration 0020).
VERSION_SQL = (
    "SELECT data_version, (SELECT epoch FROM auth_epoch WHERE id = 1) FROM pragma_data_version"
)

# The batches after the position in `seq` order (the feed index), each batch's rows from
# `readings` by its primary key's range, those still of the batch (`batch`): in the
# position's batch only the rows after its `start_s`. CROSS JOIN keeps the batches outside;
# the rows of one batch come in key order, sorted within the batch only.
_CHANGE_LOG = (
    "SELECT b.system_id, r.start_s, r.energy_wh, r.power_w, b.txid, b.seq "
    "FROM change_batches b CROSS JOIN readings r "
    "WHERE b.account_id = ? AND b.environment = ? AND b.txid = ? AND b.seq >= ? "
    "AND r.system_id = b.system_id AND r.start_s >= b.lo_s AND r.start_s <= b.hi_s "
    "AND r.start_s > CASE WHEN b.seq = ? THEN ? ELSE b.lo_s - 1 END AND r.batch = b.seq "
    "ORDER BY b.seq, r.start_s LIMIT ?"
)

SQLITE = SQLiteBackend()
