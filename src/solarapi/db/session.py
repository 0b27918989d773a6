"""The request's session dependency: the unit of work of an API request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.ext.asyncio.engine import AsyncEngine

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
    # A context manager, not a generator iterated with `async for`: an exception thrown into
    # `get_session` at its `yield` never reached a generator it iterated, whose rollback then
    # ran later in a task of its own, when the abandoned generator was collected — racing the
    # gateway's close of the same session (IllegalStateChangeError, seen under load).
    async with RequestSession(request) as session:
        yield session


class RequestSession:
    """`async with RequestSession(request) as session`: `get_session` for the `@direct`
    endpoints, which open it themselves (`kit.direct_endpoints`), with the same unit of work:
    committed on leaving, rolled back on error (a failed commit too), and the request's own
    session (when the gateway left none) closed unless untouched.

    A class, not `asynccontextmanager(get_session)`: that is two generator-based context
    managers per request (~4 µs of CPU on an uncached fleet read, which never touches its
    session: SQLite reads on the event loop's reader, PostgreSQL through `pg_reader`)."""

    __slots__ = ("_own", "_request", "_session")

    def __init__(self, request: Request) -> None:
        self._request = request

    async def __aenter__(self) -> AsyncSession:
        found = self._request.scope.get("state", {}).get(REQUEST_SESSION)
        self._own = not isinstance(found, AsyncSession)
        if isinstance(found, AsyncSession):
            session = found
        else:
            session = lazy_session(self._request.app.state.sessionmaker)
        self._session = session
        return session

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        session = self._session
        try:
            if exc_type is None:
                await _commit(session)
            else:
                await session.rollback()
        finally:
            # A session that never began a transaction holds no connection and no object,
            # and closing it would only cost `AsyncSession.close`'s shielded task (an extra
            # turn of the event loop per request): every uncached read ends here untouched.
            if self._own and not untouched(session):
                await session.close()


async def _commit(session: AsyncSession) -> None:
    """Commit what the unit of work did (nothing to do when it left the session untouched);
    rolled back if the commit fails."""
    try:
        if not untouched(session):
            await session.commit()
    except BaseException:
        await session.rollback()
        raise


def untouched(session: AsyncSession) -> bool:
    """True when the session holds nothing: no transaction (so no connection), no object.
    Committing or closing it would do nothing but still cost ~50-120 µs of SQLAlchemy's
    machinery — a read-only GET reads without ever touching its session (SQLite on the
    event loop's reader, PostgreSQL through `pg_reader`); a `LazySession` never built holds
    nothing by construction."""
    if _PENDING in session.__dict__:
        return True
    return not (session.in_transaction() or session.identity_map or session.new)


# Where a `LazySession` not yet built keeps its maker (in the instance's own dict).
_PENDING = "_solarapi_pending_maker"


def lazy_session(maker: Any) -> AsyncSession:
    """A new session of `maker`: a `LazySession` when `maker` is a plain
    `async_sessionmaker` of `AsyncSession` bound to one engine, else `maker()` itself."""
    if (
        type(maker) is async_sessionmaker
        and maker.class_ is AsyncSession
        and isinstance(maker.kw.get("bind"), AsyncEngine)
        and not maker.kw.get("binds")
    ):
        return LazySession(maker)
    made: AsyncSession = maker()
    return made


class LazySession(AsyncSession):
    """`maker()`, built on first use: an uncached read never uses the session `get_session`
    and `RequestSession` give it (SQLite reads on the event loop's reader, PostgreSQL's
    through `pg_reader`/`lone_fetch`), and building one — its `Session`, SQLAlchemy's proxy
    registry (two weak references and a `functools.partial`) — and checking it afterwards
    cost ~12 µs per request (bench/fleet/README.md).

    Until built, it answers what those reads ask of it without building: `get_transaction()`
    (None: no transaction), `in_transaction()` (False), `get_bind()` (the maker's engine,
    as `Session.get_bind` answers for a session bound to one engine), and `untouched` (True).
    Anything else — an attribute `AsyncSession.__init__` sets (`sync_session`, `_proxied`,
    …), which every other method reaches first — is not found on the instance, so Python
    calls `__getattr__`, which runs `AsyncSession.__init__` with the maker's arguments (what
    `maker()` does) and answers from the session it built. Pinned against SQLAlchemy in
    tests/db/test_db.py (`test_lazy_session_*`)."""

    def __init__(self, maker: async_sessionmaker[AsyncSession]) -> None:  # built later
        self.__dict__[_PENDING] = maker

    def __getattr__(self, name: str) -> Any:
        maker = self.__dict__.pop(_PENDING, None)
        if maker is None or name.startswith("__"):
            if maker is not None:
                self.__dict__[_PENDING] = maker
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        AsyncSession.__init__(self, **maker.kw)
        return getattr(self, name)

    @property
    def built(self) -> bool:
        return _PENDING not in self.__dict__

    def get_transaction(self) -> Any:
        if _PENDING in self.__dict__:
            return None
        return super().get_transaction()

    def in_transaction(self) -> bool:
        if _PENDING in self.__dict__:
            return False
        return super().in_transaction()

    def get_bind(self, *args: Any, **kwargs: Any) -> Any:
        maker = self.__dict__.get(_PENDING)
        if maker is not None and not args and not kwargs:
            engine: Engine = maker.kw["bind"].sync_engine
            return engine
        return super().get_bind(*args, **kwargs)


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
