"""The database's `committed_version`: a value that changes with every commit, read for the
callers who ask together at once."""

from __future__ import annotations

import asyncio
import weakref

from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from solarapi.db.backend import CommittedVersion, version_sources
from solarapi.db.engine import backend_of


class _VersionReads:
    """The database's version (`committed_version`) for the callers of one engine on one
    event loop. Each caller is answered by a read *made after it asked* — so no commit that
    ended before it asked can be missing from it — and callers who ask while a read is out,
    or in the same turn of the loop, share the next one: on PostgreSQL one round trip
    serves every request that arrived during the last instead of one each; on SQLite the
    requests that arrived together wait one turn of the loop and are then served together
    (measured in `bench/readings/README.md`).
    A failed read fails its callers alike (the gateway answers 503 when the database cannot
    serve)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._backend = backend_of(engine)
        self.loop = asyncio.get_running_loop()  # its waiters and its task are this loop's
        # PostgreSQL's snapshots say nothing of which server: told apart by this engine's.
        self._number = next(version_sources)
        self._waiting: list[asyncio.Future[CommittedVersion | None]] = []
        self._serving: asyncio.Task[None] | None = None

    async def read(self) -> CommittedVersion | None:
        waiter: asyncio.Future[CommittedVersion | None] = self.loop.create_future()
        self._waiting.append(waiter)
        if self._serving is None:
            self._serving = asyncio.ensure_future(self._serve())
        return await waiter  # a caller that goes away cancels only its own waiter

    async def _serve(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    version = await self._backend.read_version(self._engine, self._number)
                except Exception as exc:
                    for waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    continue
                except BaseException:  # cancelled (the loop is closing): so are its callers
                    for waiter in batch + self._waiting:
                        waiter.cancel()
                    raise
                for waiter in batch:
                    if not waiter.done():
                        waiter.set_result(version)
        finally:
            self._serving = None


_VERSION_READS: weakref.WeakKeyDictionary[Engine, _VersionReads] = weakref.WeakKeyDictionary()


async def committed_version(engine: AsyncEngine) -> CommittedVersion | None:
    """A value that stays the same for exactly as long as nothing is committed to the
    database — by any connection of any process — so that what was read from it while the
    value held can be reused while it still holds (`kit.versioned`), and is re-read on the
    first request after any commit: a revoked key, a plan change, a new reading. Read for
    the callers who ask together at once (`_VersionReads`).

    SQLite: `PRAGMA data_version` on the event loop's reader (~4 µs: it compares the WAL
    index header, no table is read; a commit of any other connection changes it). None where
    there is no such value: an in-memory database, a busy one.

    PostgreSQL: the server's snapshot, `pg_current_snapshot()`. Two equal snapshots mean no
    transaction that wrote ended in between (one in progress at the first is listed in it
    and would be gone from the second; one begun later would have moved the second's upper
    bound past its id when it ended); a counter row instead would serialize every writer
    that bumps it (docs/foundation.md)."""
    sync_engine = engine.sync_engine
    reads = _VERSION_READS.get(sync_engine)
    if reads is None or reads.loop is not asyncio.get_running_loop():
        reads = _VERSION_READS[sync_engine] = _VersionReads(sync_engine)
    return await reads.read()
