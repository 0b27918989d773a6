"""In-process fixed windows: the embedded default, exact for a single process."""

from __future__ import annotations

from collections.abc import Sequence

from solarapi.ratelimit.base import Decision, Window, decide

_PRUNE_EVERY = 10_000
# Any window named "minute" starts where this one does (the limit plays no part).
_MINUTE = Window("minute", 0, 60)


class MemoryRateLimiter:
    def __init__(self) -> None:
        # (bucket, window name) -> (window start, count). No awaits between read and write,
        # so the check-and-count is atomic under asyncio.
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        self._hits = 0

    def _current(self, bucket: str, window: Window, now: float) -> int:
        entry = self._counts.get((bucket, window.name))
        if entry is None or entry[0] != window.start(now):
            return 0
        return entry[1]

    def hit_sync(
        self, bucket: str, windows: Sequence[Window], now: float, degraded: bool = False
    ) -> Decision:
        counts = [self._current(bucket, w, now) for w in windows]
        allowed = all(c < w.limit for c, w in zip(counts, windows, strict=True))
        if allowed:
            counts = [c + 1 for c in counts]
            for w, c in zip(windows, counts, strict=True):
                self._counts[(bucket, w.name)] = (w.start(now), c)
            self._hits += 1
            if self._hits % _PRUNE_EVERY == 0:
                self._prune(now)
        return decide(windows, counts, now, allowed, degraded)

    def peek_sync(
        self, bucket: str, windows: Sequence[Window], now: float, degraded: bool = False
    ) -> Decision:
        counts = [self._current(bucket, w, now) for w in windows]
        allowed = all(c < w.limit for c, w in zip(counts, windows, strict=True))
        return decide(windows, counts, now, allowed, degraded)

    async def hit(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        return self.hit_sync(bucket, windows, now)

    async def peek(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        return self.peek_sync(bucket, windows, now)

    def _prune(self, now: float) -> None:
        # Windows are at most a day long; anything that started before yesterday is dead.
        horizon = int(now) - 2 * 86_400
        stale = [k for k, (start, _) in self._counts.items() if start < horizon]
        for key in stale:
            del self._counts[key]
        minute_start = _MINUTE.start(now)
        stale = [
            k for k, (start, _) in self._counts.items() if k[1] == "minute" and start < minute_start
        ]
        for key in stale:
            del self._counts[key]

    async def check(self) -> str:
        return "ok"

    async def close(self) -> None:
        return None
