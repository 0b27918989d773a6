"""Both limiter backends against one behaviour table, plus the decision's pure rules."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from solarapi.ratelimit.base import Decision, RateLimiter, Window, WindowState
from solarapi.ratelimit.memory import MemoryRateLimiter
from solarapi.ratelimit.policy import rate_limit_headers
from tests.support import REDIS_URL, need_service, redis_available

DAY = 86_400
T0 = 1_750_000_000 // DAY * DAY  # 2025-06-15T00:00:00Z
WINDOWS = (Window("minute", 3, 60), Window("day", 6, DAY))

# (action, seconds after T0, allowed, minute used, day used, binding window, retry_after)
BEHAVIOUR = [
    ("hit", 0.0, True, 1, 1, "minute", None),
    ("hit", 1.0, True, 2, 2, "minute", None),
    ("peek", 2.0, True, 2, 2, "minute", None),
    ("hit", 3.0, True, 3, 3, "minute", None),
    # Minute full: refused, and counted in neither window.
    ("hit", 4.0, False, 3, 3, "minute", 56),
    ("hit", 59.5, False, 3, 3, "minute", 1),
    ("peek", 59.9, False, 3, 3, "minute", 1),
    # The minute window resets at the whole minute. 2 left in each: a tie goes to the
    # window that resets later.
    ("hit", 60.0, True, 1, 4, "day", None),
    ("hit", 61.0, True, 2, 5, "day", None),
    ("hit", 61.5, True, 3, 6, "day", None),
    # Both full: the request may pass only once the day has reset.
    ("hit", 62.0, False, 3, 6, "day", DAY - 62),
    # Day full: refused until midnight even though the minute has room again.
    ("hit", 120.0, False, 0, 6, "day", DAY - 120),
    ("hit", DAY - 0.5, False, 0, 6, "day", 1),
    # The day window resets at 00:00:00Z.
    ("hit", float(DAY), True, 1, 1, "minute", None),
]


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[RateLimiter]:
    if request.param == "memory":
        yield MemoryRateLimiter()
        return
    need_service("Redis", redis_available())
    from solarapi.ratelimit.redis import RedisRateLimiter

    redis_limiter = RedisRateLimiter(REDIS_URL)
    try:
        yield redis_limiter
    finally:
        await redis_limiter.close()


async def test_behaviour_table(limiter: RateLimiter) -> None:
    bucket = f"test:{uuid.uuid4().hex}"
    for action, offset, allowed, minute_used, day_used, binding, retry_after in BEHAVIOUR:
        now = T0 + offset
        run = limiter.hit if action == "hit" else limiter.peek
        decision = await run(bucket, WINDOWS, now)
        row = (action, offset)
        assert decision.allowed is allowed, row
        assert not decision.degraded, row
        minute, day = decision.window("minute"), decision.window("day")
        assert minute is not None
        assert day is not None
        assert (minute.used, day.used) == (minute_used, day_used), row
        assert minute.reset == T0 + (offset // 60 + 1) * 60, row
        assert day.reset == T0 + (offset // DAY + 1) * DAY, row
        assert decision.binding.name == binding, row
        if retry_after is not None:
            assert decision.retry_after == retry_after, row
    assert await limiter.check() == "ok"


async def test_buckets_are_independent(limiter: RateLimiter) -> None:
    one, two = f"test:{uuid.uuid4().hex}", f"test:{uuid.uuid4().hex}"
    for _ in range(3):
        await limiter.hit(one, WINDOWS, T0)
    assert not (await limiter.hit(one, WINDOWS, T0)).allowed
    assert (await limiter.hit(two, WINDOWS, T0)).allowed


async def test_concurrent_hits_are_exact(limiter: RateLimiter) -> None:
    bucket = f"test:{uuid.uuid4().hex}"
    windows = (Window("minute", 300, 60), Window("day", 1000, DAY))
    decisions = await asyncio.gather(*(limiter.hit(bucket, windows, T0 + 5) for _ in range(500)))
    assert sum(d.allowed for d in decisions) == 300
    used = sorted(d.window("minute").used for d in decisions if d.allowed)  # type: ignore[union-attr]
    # Each admitted request saw its own count: no two were given the same slot.
    assert used == list(range(1, 301))
    final = await limiter.peek(bucket, windows, T0 + 5)
    assert final.window("day").used == 300  # type: ignore[union-attr]


def _decision(now: float, *states: tuple[str, int, int, int]) -> Decision:
    windows = tuple(
        WindowState(name, limit, 60 if name == "minute" else DAY, used, reset)
        for name, limit, used, reset in states
    )
    return Decision(allowed=True, windows=windows, now=now)


def test_headers_describe_the_binding_window() -> None:
    now = T0 + 43.2
    decision = _decision(now, ("minute", 60, 19, T0 + 60), ("day", 10_000, 9_990, T0 + DAY))
    headers = {k.decode(): v.decode() for k, v in rate_limit_headers(decision)}
    # Day has 10 left, minute 41: the day binds.
    assert headers["x-ratelimit-limit"] == "10000"
    assert headers["x-ratelimit-remaining"] == "10"
    assert headers["x-ratelimit-reset"] == str(T0 + DAY)
    assert headers["x-ratelimit-limit-minute"] == "60"
    assert headers["x-ratelimit-remaining-minute"] == "41"
    assert headers["x-ratelimit-limit-day"] == "10000"
    assert headers["x-ratelimit-remaining-day"] == "10"
    assert headers["ratelimit-policy"] == '"minute";q=60;w=60, "day";q=10000;w=86400'
    assert headers["ratelimit"] == f'"day";r=10;t={DAY - 43}'


def test_retry_after_rounds_up_and_is_at_least_one() -> None:
    full = ("minute", 60, 60, T0 + 60)
    assert _decision(T0 + 10.2, full).retry_after == 50
    assert _decision(T0 + 59.99, full).retry_after == 1
    assert _decision(T0 + 60.0, full).retry_after == 1


async def test_redis_counts_exactly_while_the_event_loop_is_starved() -> None:
    """A busy machine is not an unreachable Redis: the loop is blocked (as a loaded CPU
    would) while 500 hits wait for their answers, far longer than any wall-clock timeout."""
    need_service("Redis", redis_available())
    from solarapi.ratelimit.redis import RedisRateLimiter

    limiter = RedisRateLimiter(REDIS_URL)
    try:
        bucket = f"test:{uuid.uuid4().hex}"
        windows = (Window("minute", 300, 60), Window("day", 1000, DAY))
        hits = asyncio.gather(*(limiter.hit(bucket, windows, T0 + 5) for _ in range(500)))
        loop = asyncio.get_running_loop()
        for _ in range(3):  # three stalls, each longer than Redis may stay silent
            loop.call_soon(time.sleep, 2.5)
        decisions = await hits
        assert not any(d.degraded for d in decisions)
        assert sum(d.allowed for d in decisions) == 300
        assert await limiter.check() == "ok"
    finally:
        await limiter.close()


async def test_redis_that_never_answers_fails_open_and_is_not_waited_for_again() -> None:
    """A server that accepts connections and says nothing (a hung Redis) is unreachable."""
    from solarapi.ratelimit.redis import RedisRateLimiter

    connections: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # A long retry interval: the test must not depend on how fast the machine runs it.
    limiter = RedisRateLimiter(f"redis://127.0.0.1:{port}/0", retry_seconds=3600)
    try:
        bucket = f"test:{uuid.uuid4().hex}"
        first = await limiter.hit(bucket, WINDOWS, T0)
        assert first.allowed
        assert first.degraded
        assert len(connections) == 1
        # Within the retry interval the next requests go straight to the fallback counters.
        rest = [await limiter.hit(bucket, WINDOWS, T0) for _ in range(3)]
        assert [d.allowed for d in rest] == [True, True, False]
        assert all(d.degraded for d in rest)
        assert len(connections) == 1
    finally:
        await limiter.close()
        for writer in connections:
            writer.close()
        server.close()
        await server.wait_closed()


def test_headers_read_the_windows_as_their_properties_do() -> None:
    """`rate_limit_headers` reads the windows' fields by position, `remaining` and
    `seconds_to_reset` in place: its values are the properties' for every kind of window
    (under, at and over the limit; ties; one window or two)."""
    now = 1_700_000_123.4
    cases = [
        (WindowState("minute", 10, 60, 3, 1_700_000_160),),
        (
            WindowState("minute", 10, 60, 12, 1_700_000_160),
            WindowState("day", 100, 86_400, 50, 1_700_006_400),
        ),
        (
            WindowState("minute", 10, 60, 5, 1_700_000_160),
            WindowState("day", 100, 86_400, 95, 1_700_006_400),
        ),
        (
            WindowState("minute", 10, 60, 10, 1_700_000_160),
            WindowState("day", 100, 86_400, 100, 1_700_006_400),
        ),
    ]
    for windows in cases:
        decision = Decision(True, windows, now)
        headers = dict(rate_limit_headers(decision))
        binding = decision.binding
        assert headers[b"x-ratelimit-remaining"] == b"%d" % binding.remaining
        assert headers[b"x-ratelimit-limit"] == b"%d" % binding.limit
        assert headers[b"x-ratelimit-reset"] == b"%d" % binding.reset
        seconds = max(0, binding.seconds_to_reset(now))
        assert headers[b"ratelimit"] == b'"%s";r=%d;t=%d' % (
            binding.name.encode(),
            binding.remaining,
            seconds,
        )
        for w in windows:
            name = f"x-ratelimit-remaining-{w.name}".encode()
            assert headers[name] == b"%d" % w.remaining


def test_decide_makes_the_named_tuples_their_constructors_make() -> None:
    """`decide` builds its WindowStates and Decision with `tuple.__new__`: equal to, and of
    the same type as, what the classes' own constructors give."""
    from solarapi.ratelimit.base import decide

    now = 1_700_000_123.4
    windows = (Window("minute", 60, 60), Window("day", 1000, 86_400))
    for allowed, degraded in ((True, False), (False, True)):
        made = decide(windows, [7, 900], now, allowed, degraded)
        expected = Decision(
            allowed,
            (
                WindowState("minute", 60, 60, 7, 1_700_000_160),
                WindowState("day", 1000, 86_400, 900, 1_700_006_400),
            ),
            now,
            degraded,
        )
        assert made == expected
        assert type(made) is Decision
        assert [type(w) for w in made.windows] == [WindowState, WindowState]
        assert made.binding == expected.binding
        assert made.windows[1].remaining == 100
