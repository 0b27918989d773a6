"""Engine and sessions. Only the request's session dependency (and the job worker) commits."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request
from sqlalchemy import Select, event
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import URL, Dialect, Engine, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import NullPool
from sqlalchemy.util import greenlet_spawn

from solarapi.config import Settings
from solarapi.dbfaults import (
    DatabaseUnreachable,
    is_database_unavailable,
    may_be_unmigrated,
    revision_is_current,
    watch_connects,
)


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


def create_engine(settings: Settings) -> AsyncEngine:
    if settings.is_sqlite:
        _ensure_sqlite_dir(settings)
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
    engine = create_async_engine(
        settings.async_database_url,
        # asyncpg waits 60 s for a connection by default: an unreachable (not refusing)
        # database would hold every request that long before its 503.
        connect_args={"timeout": 5},
        pool_size=settings.db_pool_size,
        pool_timeout=settings.db_pool_timeout,
        max_overflow=10,
        # Last in, first out: a lightly loaded process keeps reusing its warmest connections
        # (asyncpg prepares each statement once per connection) instead of cycling through
        # all of them, and the rest can idle.
        pool_use_lifo=True,
        pool_pre_ping=False,
        pool_recycle=1800,
    )
    watch_connects(engine)
    return engine


def create_oneshot_engine(settings: Settings) -> AsyncEngine:
    """An engine without pooling, for CLI commands and migrations."""
    if settings.is_sqlite:
        _ensure_sqlite_dir(settings)
    url = _sqlite_url(settings) if settings.is_sqlite else settings.async_database_url
    engine = create_async_engine(url, poolclass=NullPool)
    if settings.is_sqlite:
        _configure_sqlite(engine)
    return engine


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


def sessionmaker_for(
    engine: AsyncEngine, settings: Settings | None = None
) -> async_sessionmaker[AsyncSession]:
    # `settings` rides along in `maker.kw["info"]`, so job handlers (which are given only the
    # sessionmaker) run with the settings of the app or worker that runs them.
    info = {"settings": settings} if settings is not None else None
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False, info=info)


# Where the gateway leaves the session it authenticated an API request in (scope["state"]).
REQUEST_SESSION = "db_session"
# Where it leaves the database's `committed_version` it authenticated the request at (None:
# none), taken before any of the request's reads: what they derive may be kept under it.
DATA_VERSION = "data_version"


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's unit of work: committed when the endpoint returns, rolled back on error.

    An API request continues the session the gateway authenticated it in (one pooled
    connection per request instead of two; the gateway closes it), anything else gets its
    own. Scoped to the endpoint function (not the response) so a failed commit becomes an
    error response instead of a lost write behind a 2xx.
    """
    session = request.scope.get("state", {}).get(REQUEST_SESSION)
    if isinstance(session, AsyncSession):
        async with _unit_of_work(session) as unit:
            yield unit
        return
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    async with maker() as own, _unit_of_work(own) as unit:
        yield unit


def untouched(session: AsyncSession) -> bool:
    """True when the session holds nothing: no transaction (so no connection), no object.
    Committing or closing it would do nothing but still cost ~50-120 µs of SQLAlchemy's
    machinery — a read-only GET reads without ever touching its session (SQLite on the
    event loop's reader, PostgreSQL through `pg_reader`)."""
    return not (session.in_transaction() or session.identity_map or session.new)


@asynccontextmanager
async def _unit_of_work(session: AsyncSession) -> AsyncIterator[AsyncSession]:
    # A context manager, not a generator iterated with `async for`: an exception thrown into
    # `get_session` at its `yield` never reached a generator it iterated, whose rollback then
    # ran later in a task of its own, when the abandoned generator was collected — racing the
    # gateway's close of the same session (IllegalStateChangeError, seen under load).
    try:
        yield session
        if not untouched(session):
            await session.commit()
    except BaseException:
        await session.rollback()
        raise


async def driver_connection(session: AsyncSession) -> Any:
    """The driver's own connection (aiosqlite or asyncpg) under the session's connection, so
    inside whatever transaction the session has begun."""
    connection = await session.connection()
    raw = (await connection.get_raw_connection()).driver_connection
    assert raw is not None
    return raw


# Numbers of the readers and engines a version is read from, unique in the process.
_version_sources = itertools.count(1)


class _Reader(sqlite3.Connection):
    """An event-loop reader. Each has a number of its own for the process's lifetime, so a
    `committed_version` of a closed reader is never taken for one of a later reader (of
    another database) whose `data_version` count started over."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.number = next(_version_sources)


# Per engine: the read-only sqlite3 connection of each thread that reads on its own (the
# event loop's; one per loop, used only between its awaits, so never by two tasks at once).
_READERS: weakref.WeakKeyDictionary[Any, dict[int, _Reader]] = weakref.WeakKeyDictionary()


def _loop_reader(engine: Engine) -> _Reader | None:
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
    return connection


def _read_on_loop(engine: Engine, sql: str, params: Sequence[Any]) -> list[Any] | None:
    """The rows from the event loop's own reader, or None when it cannot read now (an
    in-memory database, or a busy one): the caller reads through aiosqlite instead."""
    reader = _loop_reader(engine)
    if reader is None:
        return None
    try:
        return reader.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        # By result code, never by message (extended codes keep the primary in the low byte).
        if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise
    return None


# A version of the database (`committed_version`): (a number of the reader or engine that
# read it, unique in the process; SQLite's `data_version` or PostgreSQL's snapshot).
CommittedVersion = tuple[int, int | str]


class _VersionReads:
    """The database's version (`committed_version`) for the callers of one engine on one
    event loop. Each caller is answered by a read *made after it asked* — so no commit that
    ended before it asked can be missing from it — and callers who ask while a read is out,
    or in the same turn of the loop, share the next one: on PostgreSQL one round trip
    serves every request that arrived during the last instead of one each; on SQLite the
    requests that arrived together wait one turn of the loop and are then served together
    (kept 1-day readings 4,452 → 4,944 req/s; `bench/readings/README.md`).
    A failed read fails its callers alike (`gateway` answers 503 when the database cannot
    serve)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.loop = asyncio.get_running_loop()  # its waiters and its task are this loop's
        # PostgreSQL's snapshots say nothing of which server: told apart by this engine's.
        self._number = next(_version_sources)
        self._waiting: list[asyncio.Future[CommittedVersion | None]] = []
        self._serving: asyncio.Task[None] | None = None

    async def read(self) -> CommittedVersion | None:
        waiter: asyncio.Future[CommittedVersion | None] = self.loop.create_future()
        self._waiting.append(waiter)
        if self._serving is None:
            self._serving = asyncio.ensure_future(self._serve())
        return await waiter  # a caller that goes away cancels only its own waiter

    async def _serve(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    version = await self._read_now()
                except Exception as exc:
                    for waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    continue
                except BaseException:  # cancelled (the loop is closing): so are its callers
                    for waiter in batch + self._waiting:
                        waiter.cancel()
                    raise
                for waiter in batch:
                    if not waiter.done():
                        waiter.set_result(version)
        finally:
            self._serving = None

    async def _read_now(self) -> CommittedVersion | None:
        engine = self._engine
        if engine.dialect.name == "postgresql":
            async with _pooled_pg(engine) as connection:
                return self._number, str(await connection.fetchval(_SNAPSHOT_SQL))
        reader = _loop_reader(engine)
        if reader is None:
            return None
        try:
            row = reader.execute("PRAGMA data_version").fetchone()
        except sqlite3.OperationalError:
            return None
        return reader.number, int(row[0])


_SNAPSHOT_SQL = "SELECT pg_current_snapshot()::text"
_VERSION_READS: weakref.WeakKeyDictionary[Engine, _VersionReads] = weakref.WeakKeyDictionary()


async def committed_version(engine: AsyncEngine) -> CommittedVersion | None:
    """A value that stays the same for exactly as long as nothing is committed to the
    database — by any connection of any process — so that what was read from it while the
    value held can be reused while it still holds (`kit.versioned`), and is re-read on the
    first request after any commit: a revoked key, a plan change, a new reading. Read for
    the callers who ask together at once (`_VersionReads`).

    SQLite: `PRAGMA data_version` on the event loop's reader (~4 µs: it compares the WAL
    index header, no table is read; a commit of any other connection changes it). None where
    there is no such value: an in-memory database, a busy one.

    PostgreSQL: the server's snapshot, `pg_current_snapshot()`. Two equal snapshots mean no
    transaction that wrote ended in between (one in progress at the first is listed in it
    and would be gone from the second; one begun later would have moved the second's upper
    bound past its id when it ended); a counter row instead would serialize every writer
    that bumps it (docs/foundation.md)."""
    sync_engine = engine.sync_engine
    reads = _VERSION_READS.get(sync_engine)
    if reads is None or reads.loop is not asyncio.get_running_loop():
        reads = _VERSION_READS[sync_engine] = _VersionReads(sync_engine)
    return await reads.read()


async def dispose_engine(engine: AsyncEngine) -> None:
    """Close the engine's pool and its event-loop readers."""
    for connection in _READERS.pop(engine.sync_engine, {}).values():
        connection.close()
    await engine.dispose()


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
        rows = _read_on_loop(_sync_engine(session), sql, params)
        if rows is not None:
            return rows
    raw = await driver_connection(session)
    return list(await raw.execute_fetchall(sql, params))


async def _in_write_transaction(session: AsyncSession) -> bool:
    if session.get_transaction() is None:
        return False  # no connection checked out, so nothing of its own to see
    return bool((await driver_connection(session)).in_transaction)


@asynccontextmanager
async def pg_reader(session: AsyncSession) -> AsyncIterator[Any]:
    """The asyncpg connection for one read: the session's own once it has begun a
    transaction (the read must see its writes); before that, a connection checked out of the
    engine's pool for this one statement, which the session never learns about.

    Why: a read-only request never needs the session's transaction — each statement alone
    reads the last committed state, as it would as the transaction's first statement under
    READ COMMITTED. Checking a connection out of the pool and back costs ~12 µs of CPU;
    beginning, committing and closing the session around the same reads ~165 µs (measured
    with two primary-key lookups: 113 against 250 µs in all). One connection per statement,
    so a request never holds two: a later write begins the session's own."""
    if session.get_transaction() is not None:
        yield await driver_connection(session)
        return
    async with _pooled_pg(_sync_engine(session)) as connection:
        yield connection


def _sync_engine(session: AsyncSession) -> Engine:
    engine = session.get_bind()
    assert isinstance(engine, Engine)  # sessions here are bound to engines, not connections
    return engine


@asynccontextmanager
async def _pooled_pg(engine: Engine) -> AsyncIterator[Any]:
    """An asyncpg connection checked out of the engine's pool for one statement."""
    pooled = await greenlet_spawn(engine.raw_connection)
    connection = pooled.driver_connection
    assert connection is not None
    try:
        yield connection
    except BaseException as exc:
        # An error the server reported leaves the connection usable (no transaction is
        # open), unless it closed it (a terminated backend); anything else — a lost
        # connection, a cancellation mid-protocol — may have left it unusable.
        closed = connection.is_closed()
        if closed or not isinstance(exc, asyncpg.PostgresError):
            await greenlet_spawn(pooled.invalidate)
        if closed and isinstance(exc, Exception):
            # asyncpg's "connection is closed" is a plain InterfaceError: say what it means.
            raise DatabaseUnreachable("the database closed the connection") from exc
        raise
    finally:
        await greenlet_spawn(pooled.close)  # back to the pool (or closed, if invalidated)


async def fetch_rows(session: AsyncSession, sql: str, params: Sequence[Any]) -> Sequence[Any]:
    """Rows of a read through the driver (`sql` in its parameter style: `$1` for asyncpg,
    `?` for SQLite): asyncpg by `pg_reader`, SQLite by `sqlite_fetchall`."""
    if session.get_bind().dialect.driver == "asyncpg":
        async with pg_reader(session) as connection:
            return list(await connection.fetch(sql, *params))
    return await sqlite_fetchall(session, sql, params)


async def schema_revision(engine: AsyncEngine) -> str | None:
    """The database's schema revision; None when it has none (an empty or never migrated
    database). Raises when the database is unavailable.

    /health runs it on every call, so it is one statement outside any session: on SQLite on
    the event loop's own reader (~10 µs of CPU; through a pooled aiosqlite connection it
    was ~450 µs: checkout, hand-overs, the reset rollback), on PostgreSQL on a connection
    checked out of the pool for it (`_pooled_pg`)."""
    try:
        rows = await _lone_read(engine, "SELECT max(version_num) FROM alembic_version")
    except Exception as exc:
        if may_be_unmigrated(exc) and not is_database_unavailable(exc):
            return None  # no alembic_version table
        raise
    revision = rows[0][0] if rows else None
    return str(revision) if revision is not None else None


async def _lone_read(engine: AsyncEngine, sql: str) -> list[Any]:
    if engine.dialect.driver == "asyncpg":
        async with _pooled_pg(engine.sync_engine) as connection:
            return list(await connection.fetch(sql))
    rows = _read_on_loop(engine.sync_engine, sql, ())
    if rows is not None:
        return rows
    async with engine.connect() as connection:  # in memory, or busy: through aiosqlite
        return list((await connection.exec_driver_sql(sql)).all())


async def is_outage(exc: BaseException, engine: AsyncEngine) -> bool:
    """`exc` means the database cannot serve: unavailable, or a missing table or column of a
    schema older than this release (checked by reading its revision, so a real bug stays a
    500)."""
    if is_database_unavailable(exc):
        return True
    if not may_be_unmigrated(exc):
        return False
    try:
        return not revision_is_current(await schema_revision(engine))
    except Exception as probe:
        return is_database_unavailable(probe)


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]


class DriverQuery:
    """A Core SELECT run straight through the driver on the session's connection: for the
    few reads every API request makes (its key, its system).

    SQLAlchemy's asyncio adapters cost per statement far more than the statement: measured
    here, a primary-key lookup takes 4 µs of CPU in SQLite, 73 µs as one `execute_fetchall`
    hand-over to aiosqlite's thread, and 363 µs through the adapter (four hand-overs:
    cursor, execute, fetch, close, plus the result machinery); on asyncpg 107 µs raw against
    190 µs, and the adapter's first statement of a transaction adds a BEGIN round trip. Here
    the statement is compiled once per dialect, runs as one hand-over (one round trip), and
    its columns are converted by their SQLAlchemy types as a result of the adapter would be
    (with PostgreSQL's column type ids, which its processors need, from asyncpg's prepared
    statement, which asyncpg caches per connection).

    Run before the session has begun a transaction it is a lone read (on PostgreSQL on a
    connection of its own, `pg_reader`; autocommit, as any single statement under READ
    COMMITTED); after, inside that transaction. Reads only.
    """

    def __init__(self, statement: Select[*tuple[Any, ...]]) -> None:
        self._statement = statement
        self._compiled: dict[str, _Compiled] = {}

    async def _compile(self, session: AsyncSession, dialect: Dialect) -> _Compiled:
        result = self._statement.compile(dialect=dialect)
        sql = str(result)
        column_types: list[Any]
        if dialect.driver == "asyncpg":  # its result processors need the column type ids
            async with pg_reader(session) as connection:
                prepared = await connection.prepare(sql)
                column_types = [attribute.type.oid for attribute in prepared.get_attributes()]
        else:  # SQLite reports no column types
            column_types = [None] * len(self._statement.selected_columns)
        compiled = _Compiled(
            sql=sql,
            names=tuple(result.positiontup or ()),
            processors=tuple(
                column.type.dialect_impl(dialect).result_processor(dialect, column_type)
                for column, column_type in zip(
                    self._statement.selected_columns, column_types, strict=True
                )
            ),
        )
        self._compiled[dialect.name] = compiled
        return compiled

    async def all(self, session: AsyncSession, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        dialect = session.get_bind().dialect
        compiled = self._compiled.get(dialect.name) or await self._compile(session, dialect)
        rows = await fetch_rows(session, compiled.sql, [params[name] for name in compiled.names])
        processors = compiled.processors
        return [
            tuple(
                value if process is None or value is None else process(value)
                for process, value in zip(processors, row, strict=True)
            )
            for row in rows
        ]

    async def first(
        self, session: AsyncSession, params: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        rows = await self.all(session, params)
        return rows[0] if rows else None


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
