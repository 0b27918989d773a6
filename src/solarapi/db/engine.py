"""Engines and session makers, and each engine's `Backend`."""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from solarapi.config import Settings
from solarapi.db.backend import Backend
from solarapi.db.postgres import POSTGRESQL
from solarapi.db.sqlite import SQLITE

# The backends hold no state of an engine's (what they keep per engine, as SQLite's readers,
# is keyed by the engine), so each engine's is its dialect's: fixed when the engine is made.
_BY_DIALECT: dict[str, Backend] = {SQLITE.name: SQLITE, POSTGRESQL.name: POSTGRESQL}


def backend_of(bind: Engine | Connection) -> Backend:
    """The backend of the engine (or of the connection's engine)."""
    return _BY_DIALECT[bind.dialect.name]


def session_backend(session: AsyncSession) -> Backend:
    """The backend of the engine the session is bound to."""
    return _BY_DIALECT[session.get_bind().dialect.name]


def _backend_for(settings: Settings) -> Backend:
    return SQLITE if settings.is_sqlite else POSTGRESQL


def create_engine(settings: Settings) -> AsyncEngine:
    """The pooled engine of a serving process (or a job worker)."""
    return _backend_for(settings).create_engine(settings, pooled=True)


def create_oneshot_engine(settings: Settings) -> AsyncEngine:
    """An engine without pooling, for CLI commands and migrations."""
    return _backend_for(settings).create_engine(settings, pooled=False)


async def dispose_engine(engine: AsyncEngine) -> None:
    """Close the engine's pool and whatever its backend opened beside it."""
    await backend_of(engine.sync_engine).close_readers(engine)
    await engine.dispose()


def sessionmaker_for(
    engine: AsyncEngine, settings: Settings | None = None
) -> async_sessionmaker[AsyncSession]:
    # `settings` rides along in `maker.kw["info"]`, so job handlers (which are given only the
    # sessionmaker) run with the settings of the app or worker that runs them.
    info = {"settings": settings} if settings is not None else None
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False, info=info)
