"""Rate limits: the windows a request is counted in (its key's, or its IP's without a usable
key), their headers on every answer, and the 429."""

from __future__ import annotations

from solarapi.auth.principal import Principal
from solarapi.errors import RateLimited
from solarapi.gateway.exchange import Exchange
from solarapi.ratelimit.base import Decision
from solarapi.ratelimit.policy import (
    anonymous_windows,
    key_windows,
    limit_message,
    rate_limit_headers,
)


class Refused(RateLimited):
    """A 429 that names the window that refused it and the caller, for the metrics."""

    def __init__(self, message: str, retry_after: int, window: str, caller: str) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        self.window = window
        self.caller = caller


def too_many(decision: Decision, anonymous: bool = False) -> RateLimited:
    message = limit_message(decision)
    if anonymous:
        # Counted per address: no key, a bad one, or a Starter key (valid, but no API access).
        message = message.replace(
            ". Retry",
            " from this address without a usable API key (missing, invalid or revoked, or a "
            "Starter plan's key, which has no API access). Retry",
            1,
        )
    return Refused(
        message,
        decision.retry_after,
        decision.waited_for.name,
        "anonymous" if anonymous else "key",
    )


def _use(exchange: Exchange, decision: Decision) -> Decision:
    exchange.extra.extend(rate_limit_headers(decision))
    return decision


async def anonymous(exchange: Exchange, now: float, *, count: bool) -> Decision:
    """The client IP's window: counted, or only read (for its headers)."""
    state = exchange.state
    windows = anonymous_windows(state.settings)
    consult = state.limiter.hit if count else state.limiter.peek
    return _use(exchange, await consult(f"ip:{exchange.client_ip}", windows, now))


async def for_key(exchange: Exchange, principal: Principal, now: float) -> Decision:
    """The key's windows, counted."""
    state = exchange.state
    windows = key_windows(principal.plan, state.settings.rate_limit_scale)
    return _use(exchange, await state.limiter.hit(f"key:{principal.key_id}", windows, now))
