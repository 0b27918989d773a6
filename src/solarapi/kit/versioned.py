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
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

V = TypeVar("V")


class VersionedCache(Generic[V]):
    """At most `maxsize` (in the units of `getsizeof`, else entries) of the most recently
    used values. Used on the event loop only (no lock: `get` and `put` do not await)."""

    def __init__(self, maxsize: int, getsizeof: Callable[[V], int] | None = None) -> None:
        sizeof = (lambda entry: getsizeof(entry[1])) if getsizeof is not None else None
        self._entries: LRUCache[Hashable, tuple[Hashable, V]] = LRUCache(maxsize, sizeof)
        # (key, version) -> the value one caller is making, for the others who ask meanwhile.
        self._making: dict[tuple[Hashable, Hashable], asyncio.Future[V | None]] = {}

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
        if (pending := self._making.get(flight)) is not None:
            # Shielded: a waiter that goes away does not cancel the maker's answer.
            shared = await asyncio.shield(pending)
            return shared if shared is not None else (await make())[0]
        pending = self._making[flight] = asyncio.get_running_loop().create_future()
        shared = None
        try:
            value, keep = await make()
            if keep:
                self.put(key, version, value)
                shared = value
            return value
        finally:
            del self._making[flight]
            pending.set_result(shared)

    def get(self, key: Hashable, version: Hashable | None) -> V | None:
        """The value kept for `key` at `version`; None when there is none (or no version)."""
        if version is None:
            return None
        entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            return None
        return entry[1]

    def put(self, key: Hashable, version: Hashable | None, value: V) -> None:
        """Keep `value`, read at `version` (nothing is kept without a version)."""
        if version is not None:
            with contextlib.suppress(ValueError):  # larger than the whole cache: not kept
                self._entries[key] = (version, value)

    def clear(self) -> None:
        self._entries.clear()
