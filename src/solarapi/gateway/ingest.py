"""Ingest tokens at the gateway: `POST /ingest/readings` is authenticated by a system's
ingest token (`ik_…`) and counted in the token's own window, outside the account's; an
ingest token anywhere else is a 401, and so is an API key there (contract section 14)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from solarapi.auth.principal import INGEST_CALLER
from solarapi.db import REQUEST_SESSION
from solarapi.errors import ApiError, Unauthorized
from solarapi.gateway import ratelimits
from solarapi.gateway.exchange import Exchange
from solarapi.ingest.service import (
    INGEST_ROUTE,
    ONLY_INGEST,
    PER_MINUTE,
    find_caller,
    is_ingest_token,
    record_use,
    token_hash,
)
from solarapi.ratelimit.base import Window
from solarapi.ratelimit.policy import rate_limit_headers

__all__ = ["INGEST_ROUTE", "misplaced_token", "token_caller"]


@functools.cache
def _windows(scale: int) -> tuple[Window]:
    return (Window("minute", PER_MINUTE * scale, 60),)


def misplaced_token(exchange: Exchange) -> Unauthorized | None:
    """The 401 of an ingest token sent to any endpoint but the ingest one."""
    if is_ingest_token(exchange.authorization_header):
        return Unauthorized(ONLY_INGEST)
    return None


async def token_caller(exchange: Exchange, now: float) -> Unauthorized | ApiError | None:
    """401 (to be counted in the IP's anonymous window), 429 from the token's window, or
    None with the logger on the request for the endpoint. The token is read in the request's
    one session (the endpoint continues it), as a lone read; `last_used_at` is written only
    for a request the window allowed, at most once a minute, and committed at once, whatever
    the upload does."""
    state = exchange.state
    scope_state = exchange.scope["state"]
    try:
        hashed = token_hash(exchange.authorization_header, state.settings.effective_secret_key)
    except Unauthorized as refused:
        return refused
    session = state.sessionmaker()
    scope_state[REQUEST_SESSION] = session
    try:
        found = await find_caller(session, hashed)
    except Unauthorized as refused:
        return refused
    caller = found.caller
    windows = _windows(state.settings.rate_limit_scale)
    decision = await state.limiter.hit(f"ingest:{caller.token_id}", windows, now)
    exchange.extra.extend(rate_limit_headers(decision))
    if not decision.allowed:
        return ratelimits.too_many(decision)
    moment = datetime.fromtimestamp(now, UTC)
    if found.needs_touch(moment):
        await record_use(session, caller, moment)
        await session.commit()
    scope_state[INGEST_CALLER] = caller
    return None
