"""The request's session dependency: the unit of work of an API request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

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
            maker: async_sessionmaker[AsyncSession] = self._request.app.state.sessionmaker
            session = maker()
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
    event loop's reader, PostgreSQL through `pg_reader`)."""
    return not (session.in_transaction() or session.identity_map or session.new)


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
