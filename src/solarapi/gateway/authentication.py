"""Authentication: the caller's Principal from its key, kept while no key or account changes."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from solarapi.auth.principal import Principal
from solarapi.auth.service import authenticate, key_hash, needs_touch
from solarapi.db import DATA_VERSION, REQUEST_SESSION, committed_version
from solarapi.errors import Unauthorized
from solarapi.gateway.exchange import Exchange

# `key_hash` of the Authorization headers seen last: a busy key's header comes again and
# again, and its checks (the header's form, the key's checksum in base 62, the HMAC) are
# the same every time. Only a well-formed key's hash is kept (a refusal raises, which the
# cache does not keep); bounded, so a client sending many keys only churns it.
_key_hash = functools.lru_cache(maxsize=1024)(key_hash)


async def authenticate_request(exchange: Exchange, now: float) -> Principal | Unauthorized:
    """The caller of the request, or why it has none.

    The versions of the database the request is served at (`db.committed_version`) are
    taken first, in one statement: what the request reads may be kept under them and reused
    (`kit.versioned`). The caller's Principal is kept under the auth epoch, which every
    commit that changes a key or an account moves (a revoked key, a plan change, a disabled
    account; by any process) and nothing else does: read before the key, so such a change
    committed in between leaves the newer Principal under the older epoch, which the next
    request no longer matches, and a request that begins after it commits reads the key
    again. Uploads of readings leave it. What the endpoint keeps (a readings body) is kept
    under the data version, which every commit moves. When the key is read, it is in the
    request's one session, which the endpoint's SessionDep continues and the gateway closes
    (`finish.finish`) when the response is done."""
    state = exchange.state
    scope_state = exchange.scope["state"]
    moment = datetime.fromtimestamp(now, UTC)
    try:
        hashed = _key_hash(exchange.authorization_header, state.settings.effective_secret_key)
    except Unauthorized as refused:
        return refused
    versions = await committed_version(state.engine)
    epoch = None if versions is None else versions.auth
    scope_state[DATA_VERSION] = None if versions is None else versions.data
    kept: Principal | None = state.principals.get(hashed, epoch)
    touching: set[str] = state.touching
    if kept is not None and (not needs_touch(kept, moment) or hashed in touching):
        # Kept and fresh, or another request of this worker is refreshing its `last_used_at`
        # right now: once a minute every request in flight with a busy key found it due at
        # once, and each wrote it (on SQLite one writer at a time, the others sleeping in
        # the busy handler: 16 requests of a fleet's reads took 55-800 ms).
        return kept
    session = state.sessionmaker()
    scope_state[REQUEST_SESSION] = session
    refreshing = kept is not None  # it is here for `last_used_at` alone
    if refreshing:
        touching.add(hashed)
    try:
        found = await authenticate(session, hashed, moment)
        if found.wrote:
            # Its own commit: `last_used_at` stays whatever the endpoint does, and on SQLite
            # the write lock is not held through the endpoint. What the request reads after
            # it is newer than the versions: harmless (see kit.versioned). Not kept: the
            # next request reads the key again and keeps what this one committed
            # (`last_used_at` does not move the epoch).
            await session.commit()
    except Unauthorized as refused:
        return refused
    finally:
        if refreshing:
            touching.discard(hashed)
    if not found.wrote:
        state.principals.put(hashed, epoch, found.principal)
    return found.principal
