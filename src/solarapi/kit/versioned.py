"""Values derived from the database, reused for as long as the database is unchanged.

Each value is kept with the version of the database it was read at (`db.committed_version`,
which changes on every commit of any process) and given back only to a request that sees the
database at that same version. Nothing is ever invalidated by hand, so no write path can
forget to: the first request after any commit reads afresh. Without a version (an in-memory
or busy SQLite database), nothing is kept.

The version must be taken *before* the reads the value is derived from: a commit between the
two then leaves a newer value under an older version, which the next request no longer
matches; the other order could keep an older value under a newer version.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class VersionedCache(Generic[V]):
    """At most `maxsize` (in the units of `getsizeof`, else entries) of the most recently
    used values. Used on the event loop only (no lock: `get` and `put` do not await).

    The least recently used entries make room, as `cachetools.LRUCache` makes it (the same
    entries kept in the same order; compared in tests/db/test_versioned_cache.py), on an
    `OrderedDict` whose look-up and move are C calls: the `LRUCache`'s `get` was four
    Python frames, twice per API request (the caller's Principal, the kept body)."""

    def __init__(self, maxsize: int, getsizeof: Callable[[V], int] | None = None) -> None:
        self._maxsize = maxsize
        self._getsizeof = getsizeof
        self._currsize = 0
        # key -> (version, value, size), least recently used first.
        self._entries: OrderedDict[Hashable, tuple[Hashable, V, int]] = OrderedDict()
        # (key, version) -> the waiters for the value one caller is making: the others who
        # asked meanwhile (a maker without waiters makes no future: no `get_running_loop`,
        # which is a `getpid()`, on every uncached read).
        self._making: dict[tuple[Hashable, Hashable], list[asyncio.Future[V | None]]] = {}

    async def get_or_make(
        self,
        key: Hashable,
        version: Hashable | None,
        make: Callable[[], Awaitable[tuple[V, bool]]],
    ) -> V:
        """The value kept for `key` at `version`, else what `make()` gives (the value, and
        whether to keep it), kept if it says so. Callers asking for the same key at the same
        version while one makes it wait for that one instead of each making their own (after
        a commit, every request in flight would otherwise read afresh at once). If that one
        fails, goes away or may not keep its value, each waiter makes its own."""
        if version is None:
            return (await make())[0]
        kept = self.get(key, version)
        if kept is not None:
            return kept
        flight = (key, version)
        if (waiting := self._making.get(flight)) is not None:
            # A future of its own: a waiter that goes away cancels only its own.
            pending: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
            waiting.append(pending)
            shared = await pending
            return shared if shared is not None else (await make())[0]
        waiting = self._making[flight] = []
        shared = None
        try:
            value, keep = await make()
            if keep:
                self.put(key, version, value)
                shared = value
            return value
        finally:
            del self._making[flight]
            for pending in waiting:
                if not pending.done():
                    pending.set_result(shared)

    def get(self, key: Hashable, version: Hashable | None) -> V | None:
        """The value kept for `key` at `version`; None when there is none (or no version)."""
        if version is None:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)  # used: whatever its version, as `LRUCache.get`
        if entry[0] != version:
            return None
        return entry[1]

    def put(self, key: Hashable, version: Hashable | None, value: V) -> None:
        """Keep `value`, read at `version` (nothing is kept without a version, nor a value
        larger than the whole cache)."""
        if version is None:
            return
        size = 1 if self._getsizeof is None else self._getsizeof(value)
        maxsize = self._maxsize
        if size > maxsize:
            return
        entries = self._entries
        old = entries.get(key)
        grows = size if old is None else size - old[2]
        while self._currsize + grows > maxsize:  # `LRUCache`'s room, made the same way
            _, evicted = entries.popitem(last=False)
            self._currsize -= evicted[2]
            if key not in entries:
                grows = size
        self._currsize += grows
        entries[key] = (version, value, size)
        entries.move_to_end(key)

    def clear(self) -> None:
        self._entries.clear()
        self._currsize = 0
