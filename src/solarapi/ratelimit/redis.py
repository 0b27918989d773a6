"""Redis fixed windows: one Lua script checks and counts every window atomically, so the
limits hold exactly across any number of workers and hosts.

Fails open on purpose (as PyPI's limiter does): if Redis is unreachable the API keeps
serving with per-process fallback counters, and /health reports `degraded`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from solarapi.ratelimit.base import Decision, Window, decide
from solarapi.ratelimit.memory import MemoryRateLimiter

log = logging.getLogger("solarapi.ratelimit")

# KEYS: one counter per window. ARGV[1]: "1" to count, "0" to peek; then limit, ttl per window.
# A request is counted in every window only when all of them allow it.
_SCRIPT = """
local allowed = 1
local counts = {}
for i = 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  counts[i] = c
  if c >= tonumber(ARGV[2 * i]) then allowed = 0 end
end
if allowed == 1 and ARGV[1] == '1' then
  for i = 1, #KEYS do
    counts[i] = redis.call('INCR', KEYS[i])
    if counts[i] == 1 then redis.call('EXPIRE', KEYS[i], ARGV[2 * i + 1]) end
  end
end
table.insert(counts, 1, allowed)
return counts
"""

# After a failure, Redis is retried at most this often so a dead server costs no latency.
_RETRY_SECONDS = 1.0
# Per process. One script call takes well under a millisecond, so a few dozen connections
# serve thousands of requests per second; beyond that, requests queue for a connection.
_MAX_CONNECTIONS = 32
# How long Redis may stay silent before it counts as unreachable, in time this process was
# free to notice an answer (see `_answer`). A refused or reset connection fails at once.
_SILENCE_SECONDS = 2.0
_TICK_SECONDS = 0.1

T = TypeVar("T")


async def _answer(call: Awaitable[T]) -> T:
    """Wait for Redis's answer, giving up after `_SILENCE_SECONDS` of silence.

    Silence is counted in ticks, each credited at most `_TICK_SECONDS` however late it fires:
    on a busy machine (or in a burst of requests) the event loop itself runs late, and a
    wall-clock timeout then expires while the answer sits unread in the socket — the limiter
    would fail open, let requests through uncounted, and count them in Redis as well. A tick
    that fires on time means the loop was free and Redis really said nothing."""
    task = asyncio.ensure_future(call)
    loop = asyncio.get_running_loop()
    silent = 0.0
    try:
        while True:
            started = loop.time()
            done, _ = await asyncio.wait({task}, timeout=_TICK_SECONDS)
            if done:
                return task.result()
            silent += min(loop.time() - started, _TICK_SECONDS)
            if silent >= _SILENCE_SECONDS:
                raise TimeoutError(f"no answer from Redis in {_SILENCE_SECONDS:g} s")
    finally:
        # Cancelled mid-read, redis-py closes the connection (no half-read answer is reused).
        task.cancel()


class RedisRateLimiter:
    def __init__(
        self,
        url: str,
        retry_seconds: float = _RETRY_SECONDS,
        on_fallback: Callable[[], None] | None = None,
    ) -> None:
        # No client-side timeouts and no retries: `_answer` bounds every call in time the
        # process could use (redis-py's own timeouts are wall-clock and expire under load), and
        # the fallback below is the answer to a failure anyway. Requests wait for a connection
        # on `_slots`, never in the pool, so a burst queues instead of failing open; a request
        # that gets a slot after Redis went down takes the fallback without waiting again.
        pool = aioredis.ConnectionPool.from_url(
            url,
            max_connections=_MAX_CONNECTIONS,
            socket_connect_timeout=None,
            socket_timeout=None,
            health_check_interval=30,
            retry=Retry(NoBackoff(), 0),
        )
        self._redis = aioredis.Redis.from_pool(pool)  # closes the pool with the client
        self._script = self._redis.register_script(_SCRIPT)
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)
        self._fallback = MemoryRateLimiter()
        self._down_until = 0.0
        self._retry_seconds = retry_seconds
        self._on_fallback = on_fallback

    @staticmethod
    def _keys(bucket: str, windows: Sequence[Window], now: float) -> list[str]:
        # The hash tag keeps one bucket's windows in one Redis Cluster slot.
        return [f"rl:{{{bucket}}}:{w.name}:{w.start(now)}" for w in windows]

    async def _run(
        self, bucket: str, windows: Sequence[Window], now: float, count: bool
    ) -> Decision:
        args: list[int | str] = ["1" if count else "0"]
        for w in windows:
            args += [w.limit, w.seconds + 60]
        try:
            async with self._slots:
                if time.monotonic() < self._down_until:
                    return self._fallback_decision(bucket, windows, now, count)
                result = await _answer(
                    self._script(keys=self._keys(bucket, windows, now), args=args)
                )
        except (RedisError, OSError) as exc:  # TimeoutError is an OSError
            if self._down_until == 0.0 or time.monotonic() - self._down_until > 60:
                log.warning("redis rate limiter unreachable, failing open: %s", exc)
            self._down_until = time.monotonic() + self._retry_seconds
            return self._fallback_decision(bucket, windows, now, count)
        self._down_until = 0.0
        allowed = bool(int(result[0]))
        return decide(windows, [int(c) for c in result[1:]], now, allowed, False)

    def _fallback_decision(
        self, bucket: str, windows: Sequence[Window], now: float, count: bool
    ) -> Decision:
        if self._on_fallback is not None:
            self._on_fallback()
        if count:
            return self._fallback.hit_sync(bucket, windows, now, degraded=True)
        return self._fallback.peek_sync(bucket, windows, now, degraded=True)

    async def hit(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        return await self._run(bucket, windows, now, count=True)

    async def peek(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        return await self._run(bucket, windows, now, count=False)

    async def check(self) -> str:
        try:
            async with self._slots:
                await _answer(self._redis.ping())
        except (RedisError, OSError):
            return "degraded"
        return "ok"

    async def close(self) -> None:
        await self._redis.aclose()


async def probe(url: str, timeout_seconds: float = 2.0) -> str | None:
    """Whether Redis at `url` answers a PING: None when it does, else why not (for the
    start-up warning; the limiter itself fails open either way)."""
    client = aioredis.from_url(
        url, socket_connect_timeout=timeout_seconds, socket_timeout=timeout_seconds
    )
    try:
        async with asyncio.timeout(timeout_seconds * 2):
            await client.ping()
    except (RedisError, OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        await client.aclose()
    return None
