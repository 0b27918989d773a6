"""Which windows apply to whom, and the headers that describe them."""

from __future__ import annotations

from collections.abc import Callable

from solarapi.config import Settings
from solarapi.kit.plans import PLAN_LIMITS, Plan
from solarapi.ratelimit.base import Decision, RateLimiter, Window
from solarapi.ratelimit.memory import MemoryRateLimiter
from solarapi.ratelimit.redis import RedisRateLimiter


def key_windows(plan: Plan, scale: int = 1) -> tuple[Window, Window]:
    limits = PLAN_LIMITS[plan]
    return (
        Window("minute", limits.per_minute * scale, 60),
        Window("day", limits.per_day * scale, 86_400),
    )


def anonymous_windows(settings: Settings) -> tuple[Window]:
    return (Window("minute", settings.anonymous_per_minute, 60),)


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
        (b"x-ratelimit-limit", str(binding.limit).encode()),
        (b"x-ratelimit-remaining", str(binding.remaining).encode()),
        (b"x-ratelimit-reset", str(binding.reset).encode()),
    ]
    policy: list[str] = []
    for w in decision.windows:  # names are lower case: "minute", "day"
        headers.append((f"x-ratelimit-limit-{w.name}".encode(), str(w.limit).encode()))
        headers.append((f"x-ratelimit-remaining-{w.name}".encode(), str(w.remaining).encode()))
        policy.append(f'"{w.name}";q={w.limit};w={w.seconds}')
    seconds_left = max(0, binding.reset - int(decision.now))
    headers.append((b"ratelimit-policy", ", ".join(policy).encode()))
    headers.append(
        (b"ratelimit", f'"{binding.name}";r={binding.remaining};t={seconds_left}'.encode())
    )
    return headers


def limit_message(decision: Decision) -> str:
    blocked = [w for w in decision.windows if w.used >= w.limit] or [decision.binding]
    window = max(blocked, key=lambda w: w.reset)
    return (
        f"Rate limit exceeded: {window.limit} requests per {window.name}. "
        f"Retry in {decision.retry_after} s."
    )
