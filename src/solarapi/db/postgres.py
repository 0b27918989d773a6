"""PostgreSQL (asyncpg): connections for one statement, and the PostgreSQL `Backend`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy import Table, literal, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.util import greenlet_spawn

from solarapi.config import Settings
from solarapi.db.backend import (
    Backend,
    CommittedVersion,
    driver_connection,
    sync_engine_of,
)
from solarapi.dbfaults import DatabaseUnreachable, watch_connects

SNAPSHOT_SQL = "SELECT pg_current_snapshot()::text"


@asynccontextmanager
async def pooled_connection(engine: Engine) -> AsyncIterator[Any]:
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
        async with pg_reader(session) as connection:
            return list(await connection.fetch(sql, *params))

    async def lone_read(self, engine: AsyncEngine, sql: str) -> list[Any]:
        async with pooled_connection(engine.sync_engine) as connection:
            return list(await connection.fetch(sql))

    async def read_version(self, engine: Engine, engine_number: int) -> CommittedVersion | None:
        # The server's snapshot says nothing of which server: told apart by the engine's number.
        async with pooled_connection(engine) as connection:
            return engine_number, str(await connection.fetchval(SNAPSHOT_SQL))

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

    async def commit_without_flush_wait(self, session: AsyncSession) -> None:
        await session.execute(text("SET LOCAL synchronous_commit TO OFF"))

    async def close_readers(self, engine: AsyncEngine) -> None:
        pass  # nothing beside the pool


POSTGRESQL = PostgresBackend()
