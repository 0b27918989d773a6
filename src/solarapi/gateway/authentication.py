"""Authentication: the caller's Principal from its key, kept while the database is unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

from solarapi.auth.principal import Principal
from solarapi.auth.service import authenticate, key_hash, needs_touch
from solarapi.db import DATA_VERSION, REQUEST_SESSION, committed_version
from solarapi.errors import Unauthorized
from solarapi.gateway.exchange import Exchange


async def authenticate_request(exchange: Exchange, now: float) -> Principal | Unauthorized:
    """The caller of the request, or why it has none.

    The version of the database the request is served at (`db.committed_version`) is taken
    first: what the request reads, the caller's Principal among them, may be kept under it
    and reused (`kit.versioned`), so a revoked key, a plan change, anything committed by any
    process is seen by the next request. When the key is read, it is in the request's one
    session, which the endpoint's SessionDep continues and the gateway closes
    (`finish.finish`) when the response is done."""
    state = exchange.state
    scope_state = exchange.scope["state"]
    moment = datetime.fromtimestamp(now, UTC)
    try:
        hashed = key_hash(
            exchange.headers.get("authorization"), state.settings.effective_secret_key
        )
    except Unauthorized as refused:
        return refused
    version = await committed_version(state.engine)
    scope_state[DATA_VERSION] = version
    kept: Principal | None = state.principals.get(hashed, version)
    if kept is not None and not needs_touch(kept, moment):
        return kept
    session = state.sessionmaker()
    scope_state[REQUEST_SESSION] = session
    try:
        found = await authenticate(session, hashed, moment)
    except Unauthorized as refused:
        return refused
    if found.wrote:
        # Its own commit: `last_used_at` stays whatever the endpoint does, and on SQLite the
        # write lock is not held through the endpoint. What the request reads after it is
        # newer than `version`: harmless (see kit.versioned).
        await session.commit()
    else:
        state.principals.put(hashed, version, found.principal)
    return found.principal
