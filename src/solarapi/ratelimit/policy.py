"""Which windows apply to whom, and the headers that describe them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from solarapi.config import Settings
from solarapi.kit.plans import PLAN_LIMITS, Plan
from solarapi.ratelimit.base import Decision, RateLimiter, Window, WindowState
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
    binding = decision.binding
    headers = [
        (b"x-ratelimit-limit", b"%d" % binding.limit),
        (b"x-ratelimit-remaining", b"%d" % binding.remaining),
        (b"x-ratelimit-reset", b"%d" % binding.reset),
    ]
    for w in decision.windows:
        limit_name, remaining_name = _window_header_names(w.name)
        headers.append((limit_name, b"%d" % w.limit))
        headers.append((remaining_name, b"%d" % w.remaining))
    seconds_left = max(0, binding.seconds_to_reset(decision.now))
    headers.append((b"ratelimit-policy", _policy(decision.windows)))
    headers.append(
        (b"ratelimit", b'"%s";r=%d;t=%d' % (binding.name.encode(), binding.remaining, seconds_left))
    )
    return headers


@functools.cache
def _window_header_names(name: str) -> tuple[bytes, bytes]:
    # Window names are lower case: "minute", "day".
    return f"x-ratelimit-limit-{name}".encode(), f"x-ratelimit-remaining-{name}".encode()


def _policy(windows: Sequence[WindowState]) -> bytes:
    return _policy_of(tuple((w.name, w.limit, w.seconds) for w in windows))


@functools.cache
def _policy_of(windows: tuple[tuple[str, int, int], ...]) -> bytes:
    # A handful of distinct values (one per plan and the anonymous window): built once each.
    return ", ".join(f'"{name}";q={limit};w={seconds}' for name, limit, seconds in windows).encode()


def limit_message(decision: Decision) -> str:
    window = decision.waited_for
    return (
        f"Rate limit exceeded: {window.limit} requests per {window.name}. "
        f"Retry in {decision.retry_after} s."
    )
