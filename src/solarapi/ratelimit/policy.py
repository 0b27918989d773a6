"""Which windows apply to whom, and the headers that describe them."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

from solarapi.config import Settings
from solarapi.kit.plans import PLAN_LIMITS, Plan
from solarapi.ratelimit.base import Decision, RateLimiter, Window, binding_of
from solarapi.ratelimit.memory import MemoryRateLimiter
from solarapi.ratelimit.redis import RedisRateLimiter


@functools.cache
def key_windows(plan: Plan, scale: int = 1) -> tuple[Window, Window]:
    limits = PLAN_LIMITS[plan]
    return (
        Window("minute", limits.per_minute * scale, 60),
        Window("day", limits.per_day * scale, 86_400),
    )


def anonymous_windows(settings: Settings) -> tuple[Window]:
    return _per_minute(settings.anonymous_per_minute)


@functools.cache
def _per_minute(limit: int) -> tuple[Window]:
    return (Window("minute", limit, 60),)


def create_limiter(
    settings: Settings, on_fallback: Callable[[], None] | None = None
) -> RateLimiter:
    """`on_fallback` is called for each decision taken without Redis (it was unreachable)."""
    if settings.redis_url:
        return RedisRateLimiter(settings.redis_url, on_fallback=on_fallback)
    return MemoryRateLimiter()


def rate_limit_headers(decision: Decision) -> list[tuple[bytes, bytes]]:
    """Every answer's rate-limit headers: the binding window's `X-RateLimit-*`, each
    window's limit and remaining, `RateLimit-Policy` and `RateLimit`. What does not change
    from one request to the next (the names, the limits, the policy) is written once per set
    of windows (`_fixed`); only the counts and times are formatted per request."""
    windows = decision.windows
    # The windows' fields by position, their `remaining` and `seconds_to_reset` in place:
    # each property read or method call is a Python call, on every answer.
    name, limit, _, used, reset = binding_of(windows)
    per_window, policy = _fixed(tuple(map(_FIXED_FIELDS, windows)))
    remaining = max(limit - used, 0)
    headers = [
        (b"x-ratelimit-limit", b"%d" % limit),
        (b"x-ratelimit-remaining", b"%d" % remaining),
        (b"x-ratelimit-reset", b"%d" % reset),
    ]
    for (_, w_limit, _, w_used, _), (limit_header, remaining_name) in zip(
        windows, per_window, strict=True
    ):
        headers.append(limit_header)
        headers.append((remaining_name, b"%d" % max(w_limit - w_used, 0)))
    headers.append(policy)
    seconds_left = max(0, reset - int(decision.now))  # binding.seconds_to_reset
    headers.append((b"ratelimit", b'"%s";r=%d;t=%d' % (name.encode(), remaining, seconds_left)))
    return headers


# A window's name, limit and seconds: what `_fixed` is keyed by.
_FIXED_FIELDS = operator.itemgetter(slice(0, 3))


@functools.cache
def _fixed(
    windows: tuple[tuple[str, int, int], ...],
) -> tuple[tuple[tuple[tuple[bytes, bytes], bytes], ...], tuple[bytes, bytes]]:
    """Per window its limit header and the name of its remaining header; the policy header.
    A handful of distinct values (one per plan and the anonymous window): built once each.
    Window names are lower case: "minute", "day"."""
    per_window = tuple(
        (
            (f"x-ratelimit-limit-{name}".encode(), b"%d" % limit),
            f"x-ratelimit-remaining-{name}".encode(),
        )
        for name, limit, _ in windows
    )
    policy = ", ".join(f'"{name}";q={limit};w={seconds}' for name, limit, seconds in windows)
    return per_window, (b"ratelimit-policy", policy.encode())


def limit_message(decision: Decision) -> str:
    window = decision.waited_for
    return (
        f"Rate limit exceeded: {window.limit} requests per {window.name}. "
        f"Retry in {decision.retry_after} s."
    )
