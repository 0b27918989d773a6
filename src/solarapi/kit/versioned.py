"""Values derived from the database, reused for as long as the database is unchanged.

Each value is kept with the version of the database it was read at (`db.committed_version`,
which changes on every commit of any process) and given back only to a request that sees the
database at that same version. Nothing is ever invalidated by hand, so no write path can
forget to: the first request after any commit reads afresh. Where the database has no such
version (PostgreSQL), nothing is kept.

The version must be taken *before* the reads the value is derived from: a commit between the
two then leaves a newer value under an older version, which the next request no longer
matches; the other order could keep an older value under a newer version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

V = TypeVar("V")


class VersionedCache(Generic[V]):
    """At most `maxsize` (in the units of `getsizeof`, else entries) of the most recently
    used values. Used on the event loop only (no lock: no await inside)."""

    def __init__(self, maxsize: int, getsizeof: Callable[[V], int] | None = None) -> None:
        sizeof = (lambda entry: getsizeof(entry[1])) if getsizeof is not None else None
        self._entries: LRUCache[Hashable, tuple[Hashable, V]] = LRUCache(maxsize, sizeof)

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
