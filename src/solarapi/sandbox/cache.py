"""A small thread-safe LRU cache with a fixed number of entries.

The simulators compute whole UTC months at a time and keep the results here, so a warm query
is a dictionary lookup and a slice. Values must be immutable (read-only numpy arrays), since
every caller gets the same object.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):  # Python 3.11: no PEP 695 syntax
    def __init__(self, max_entries: int) -> None:
        self._entries: LRUCache[K, V] = LRUCache(maxsize=max_entries)
        # Reports render in worker threads; a plain dict's move/evict sequence is not atomic.
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._entries.get(key)  # a hit makes the entry the most recent

    def peek(self, key: K) -> bool:
        """Whether `key` is cached, without touching its recency."""
        with self._lock:
            return key in self._entries

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value  # evicts the least recently used entry when full

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
