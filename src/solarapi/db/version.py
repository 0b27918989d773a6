"""The database's `committed_version`: a value that changes with every commit, and the auth
epoch, which changes with every commit that changes a key or an account, read together for
the callers who ask together at once."""

from __future__ import annotations

import asyncio
import weakref

from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from solarapi.db.backend import DatabaseVersions, version_sources
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
        self._engine = self.engine = engine
        self._backend = backend_of(engine)
        self.loop = asyncio.get_running_loop()  # its waiters and its task are this loop's
        # PostgreSQL's snapshots say nothing of which server: told apart by this engine's.
        self._number = next(version_sources)
        self._waiting: list[asyncio.Future[DatabaseVersions | None]] = []
        # A read in this process (SQLite's) is served from a plain callback of the next
        # turn: what a task's first step was, without the task (its creation, registration
        # and coroutine: every API request's).
        self._read_now = self._backend.read_version_now
        self._serving: asyncio.Task[None] | asyncio.Handle | None = None

    async def read(self) -> DatabaseVersions | None:
        waiter: asyncio.Future[DatabaseVersions | None] = self.loop.create_future()
        self._waiting.append(waiter)
        if self._serving is None:
            if self._read_now is not None:
                self._serving = self.loop.call_soon(self._serve_now)
            else:
                # On its loop, without `ensure_future` asking for the running loop (a `getpid()`).
                self._serving = self.loop.create_task(self._serve())
        return await waiter  # a caller that goes away cancels only its own waiter

    def _serve_now(self) -> None:
        """`_serve` for a backend that reads without awaiting: the callers who asked before
        this turn, answered by one read made now."""
        batch, self._waiting = self._waiting, []
        self._serving = None
        read_now = self._read_now
        assert read_now is not None
        try:
            version = read_now(self._engine, self._number)
        except Exception as exc:
            for waiter in batch:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        for waiter in batch:
            if not waiter.done():
                waiter.set_result(version)

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
_last_reads: _VersionReads | None = None


async def committed_version(engine: AsyncEngine) -> DatabaseVersions | None:
    """Two values read in one statement (so at one moment of the database):

    - `data` stays the same for exactly as long as nothing is committed to the database — by
      any connection of any process — so that what was read from it while the value held
      can be reused while it still holds (`kit.versioned`), and is re-read on the first
      request after any commit: a new reading, a deleted system;
    - `auth`, the auth epoch, stays the same for as long as no commit changes an API key
      (but its `last_used_at`) or an account: a revoked key, a plan change, a disabled
      account. Triggers bump it in the same transaction as the change (migration 0020), so
      no write path can forget to. The callers' Principals are kept under it, so a fleet's
      uploads do not make every next request read its key again.

    Read for the callers who ask together at once (`_VersionReads`). Whatever is kept under
    either must be read *after* it (`kit.versioned`): a change committed in between leaves a
    newer value under an older version, which the next request no longer matches.

    SQLite: `PRAGMA data_version` (it compares the WAL index header; a commit of any other
    connection changes it) and the epoch's row, in one statement on the event loop's reader.
    None where there is no such value: an in-memory database, a busy one.

    PostgreSQL: the server's snapshot, `pg_current_snapshot()`, and the epoch's row, in one
    statement (one round trip, one snapshot). Two equal snapshots mean no transaction that
    wrote ended in between (one in progress at the first is listed in it and would be gone
    from the second; one begun later would have moved the second's upper bound past its id
    when it ended); a counter row bumped by every writer instead would serialize them all
    (docs/foundation.md) — the epoch's row is bumped only by the rare writers of keys and
    accounts."""
    sync_engine = engine.sync_engine
    global _last_reads
    reads = _last_reads
    loop = asyncio.get_running_loop()
    if reads is None or reads.engine is not sync_engine or reads.loop is not loop:
        # Not the last engine and loop asked for (a serving process has one of each): found
        # by the weak dictionary's look-up, which makes a weak reference of the engine.
        reads = _VERSION_READS.get(sync_engine)
        if reads is None or reads.loop is not loop:
            reads = _VERSION_READS[sync_engine] = _VersionReads(sync_engine)
        _last_reads = reads
    return await reads.read()
