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

    def _counts_of(
        self, bucket: str, windows: Sequence[Window], now: float
    ) -> tuple[list[tuple[tuple[str, str], int]], list[int], bool]:
        """Each window's key and start, its count now, and whether every window allows one
        more. A plain loop (one or two windows, on every request): the comprehensions and
        generators it replaces cost more than the dictionary work."""
        counts = self._counts
        keys: list[tuple[tuple[str, str], int]] = []
        used: list[int] = []
        allowed = True
        for w in windows:
            start = int(now // w.seconds) * w.seconds  # Window.start
            key = (bucket, w.name)
            entry = counts.get(key)
            count = entry[1] if entry is not None and entry[0] == start else 0
            if count >= w.limit:
                allowed = False
            keys.append((key, start))
            used.append(count)
        return keys, used, allowed

    def hit_sync(
        self, bucket: str, windows: Sequence[Window], now: float, degraded: bool = False
    ) -> Decision:
        keys, counts, allowed = self._counts_of(bucket, windows, now)
        if allowed:
            store = self._counts
            for i, (key, start) in enumerate(keys):
                counts[i] += 1
                store[key] = (start, counts[i])
            self._hits += 1
            if self._hits % _PRUNE_EVERY == 0:
                self._prune(now)
        return decide(windows, counts, now, allowed, degraded)

    def peek_sync(
        self, bucket: str, windows: Sequence[Window], now: float, degraded: bool = False
    ) -> Decision:
        _, counts, allowed = self._counts_of(bucket, windows, now)
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
