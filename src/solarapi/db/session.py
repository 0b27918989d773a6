"""The request's session dependency: the unit of work of an API request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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
    session = request.scope.get("state", {}).get(REQUEST_SESSION)
    if isinstance(session, AsyncSession):
        async with _unit_of_work(session) as unit:
            yield unit
        return
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    own = maker()
    try:
        async with _unit_of_work(own) as unit:
            yield unit
    finally:
        # A session that never began a transaction holds no connection and no object, and
        # closing it would only cost `AsyncSession.close`'s shielded task (an extra turn of
        # the event loop per request): every uncached read ends here untouched.
        if not untouched(own):
            await own.close()


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


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
