"""Engine and sessions. Only the request's session dependency (and the job worker) commits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import event
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import NullPool

from solarapi.config import Settings


def create_engine(settings: Settings) -> AsyncEngine:
    if settings.is_sqlite:
        _ensure_sqlite_dir(settings)
        engine = create_async_engine(
            settings.async_database_url,
            connect_args={"timeout": 30},
            pool_size=settings.db_pool_size,
            max_overflow=10,
        )
        _configure_sqlite(engine)
        return engine
    return create_async_engine(
        settings.async_database_url,
        # asyncpg waits 60 s for a connection by default: an unreachable (not refusing)
        # database would hold every request that long before its 503.
        connect_args={"timeout": 5},
        pool_size=settings.db_pool_size,
        max_overflow=10,
        pool_pre_ping=False,
        pool_recycle=1800,
    )


def create_oneshot_engine(settings: Settings) -> AsyncEngine:
    """An engine without pooling, for CLI commands and migrations."""
    if settings.is_sqlite:
        _ensure_sqlite_dir(settings)
    engine = create_async_engine(settings.async_database_url, poolclass=NullPool)
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


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's unit of work: committed when the endpoint returns, rolled back on error.

    Scoped to the endpoint function (not the response) so a failed commit becomes an error
    response instead of a lost write behind a 2xx.
    """
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    async with maker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
