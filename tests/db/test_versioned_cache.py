"""What is kept while the database is unchanged (`kit.versioned`): rendered readings bodies
and the callers' Principals. Every commit, by any connection of any process, must
be seen by the very next request of every other process: a revoked key, a plan change, a
deleted system, a new reading — on SQLite (`PRAGMA data_version`) and on PostgreSQL (the
server's snapshot, read after the request arrived).

"Another process" is modelled two ways: a second app in this process on the same database
file (its own engine, reader and caches, exactly as a worker has), and a real
`solarapi serve --workers 2` whose workers both answered before the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text
from sqlalchemy.engine import make_url

from solarapi.auth import repository as auth_repository
from solarapi.config import Settings
from solarapi.db import (
    committed_version,
    create_engine,
    create_oneshot_engine,
    dispose_engine,
)
from solarapi.db import postgres as db_postgres
from solarapi.db import sqlite as db_sqlite
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.versioned import VersionedCache
from solarapi.models import Base
from solarapi.readings import router as readings_router
from solarapi.readings import service as readings_service
from tests.support import (
    DATABASES,
    REDIS_URL,
    TEST_SECRET,
    Server,
    Tenant,
    TestClock,
    admin_connection,
    client_for,
    make_tenant,
    migrated_settings,
    need_service,
    redis_available,
    run_cli,
    running_app,
    served,
    settings_env,
)
from tests.systems.factories import create_system, quarter_series, system_body, upload

DAY = datetime(2025, 6, 1, tzinfo=UTC)
QUERY = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z", "interval": "1h"}


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Settings]:
    """A fresh migrated SQLite database file of this test's own."""
    with migrated_settings("sqlite", tmp_path) as settings:
        yield settings


@pytest.fixture(params=DATABASES)
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """A fresh migrated database of this test's own, of each kind."""
    with migrated_settings(request.param, tmp_path) as settings:
        yield settings


@asynccontextmanager
async def _two_workers(settings: Settings) -> AsyncIterator[tuple[FastAPI, FastAPI]]:
    async with running_app(settings) as first, running_app(settings) as second:
        yield first, second


class _Calls:
    """Counts calls of a function of ours that still runs (not a mock): whether a request
    read the key or the readings, or was answered from what was kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        self.count = 0
        real = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:  # a coroutine function's coroutine
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


async def _energy(client: httpx.AsyncClient, system_id: str) -> Any:
    response = await client.get(f"/api/v1/systems/{system_id}/readings", params=QUERY)
    assert response.status_code == 200, response.text
    return response.json()["meta"]["totals"]["energy_wh"]


def test_the_version_changes_with_every_commit_of_any_connection(
    sqlite_file: Settings, tmp_path: Path
) -> None:
    settings = sqlite_file

    async def check() -> None:
        engine = create_engine(settings)
        try:
            before = await committed_version(engine)
            assert before is not None
            assert await committed_version(engine) == before  # nothing committed: the same
            other = sqlite3.connect(tmp_path / "solar.db", isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            other.execute("UPDATE accounts SET name = name || '' WHERE 0")
            assert await committed_version(engine) == before  # not committed yet
            other.execute("INSERT INTO alembic_version VALUES ('x')")
            other.execute("ROLLBACK")
            assert await committed_version(engine) == before  # rolled back
            other.execute("INSERT INTO alembic_version VALUES ('x')")
            other.close()
            after = await committed_version(engine)
            assert after is not None
            assert after != before
        finally:
            await dispose_engine(engine)

    asyncio.run(check())


def test_on_sqlite_callers_who_ask_together_share_one_read(
    sqlite_file: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _Calls(monkeypatch, db_sqlite, "loop_reader")

    async def check() -> None:
        engine = create_engine(sqlite_file)
        try:
            together = await asyncio.gather(*(committed_version(engine) for _ in range(5)))
            assert together[0] is not None
            assert together == [together[0]] * 5
            assert reads.count == 1
            assert await committed_version(engine) == together[0]  # asked later: read again
            assert reads.count == 2
        finally:
            await dispose_engine(engine)

    asyncio.run(check())


async def test_on_sqlite_a_failed_read_fails_its_callers_alike_and_the_next_reads_again(
    tmp_path: Path,
) -> None:
    """SQLite's reads are served from a callback of the next turn: a read that fails (here a
    file that is not a database) fails every caller of its batch with its error, and a
    caller who asks later is served by a read of its own."""
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not an SQLite database file" * 200)
    engine = create_oneshot_engine(
        Settings(database_url=f"sqlite:///{path}", secret_key=TEST_SECRET)
    )
    try:
        together = await asyncio.gather(
            *(committed_version(engine) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(result, sqlite3.DatabaseError) for result in together)
        assert together[0] is together[1] is together[2]  # one read, one error
        with pytest.raises(sqlite3.DatabaseError) as later:
            await committed_version(engine)
        assert later.value is not together[0]
    finally:
        await dispose_engine(engine)


async def test_no_version_for_an_in_memory_database() -> None:
    memory = create_oneshot_engine(
        Settings(database_url="sqlite:///:memory:", secret_key=TEST_SECRET)
    )
    try:
        assert await committed_version(memory) is None
    finally:
        await dispose_engine(memory)


async def test_on_postgresql_the_version_is_the_servers_snapshot(
    postgres_settings: Settings,
) -> None:
    """The snapshot is the whole server's: other tests' commits (in their own databases)
    change it too, so "unchanged" is shown as "unchanged at least once, within a deadline";
    a commit of ours changes it every time."""
    engine = create_engine(postgres_settings)

    async def unchanged_by(action: Callable[[], Awaitable[object]]) -> None:
        deadline = time.monotonic() + 60
        while True:
            before = await committed_version(engine)
            await action()
            if await committed_version(engine) == before:
                return
            assert time.monotonic() < deadline, "the version never held"

    conn = await admin_connection(make_url(postgres_settings.database_url).database)
    await conn.execute("CREATE TEMP TABLE written (n int)")
    try:
        await unchanged_by(lambda: asyncio.sleep(0))  # nothing committed
        await unchanged_by(lambda: conn.execute("SELECT count(*) FROM systems"))  # a read
        await unchanged_by(  # an UPDATE that changes no row
            lambda: conn.execute("UPDATE accounts SET name = name WHERE id = 'none'")
        )
        first = await committed_version(engine)
        async with conn.transaction():
            await conn.execute("INSERT INTO written VALUES (1)")
            during = await committed_version(engine)  # in progress: the same or not
        assert await committed_version(engine) not in (first, during)  # ended: never the same
    finally:
        await conn.close()
        await dispose_engine(engine)


async def test_on_postgresql_a_caller_never_gets_a_snapshot_read_before_it_asked(
    postgres_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Callers share snapshot reads, but one that asks while a read is out waits for the
    next: the read out may predate a commit the caller has already seen end. Here the read
    out is held (it waits for an advisory lock the test holds) across such a commit."""
    held = (
        "SELECT pg_current_snapshot()::text, (SELECT epoch FROM auth_epoch WHERE id = 1)"
        " FROM pg_advisory_xact_lock_shared(1717)"
    )
    monkeypatch.setattr(db_postgres, "SNAPSHOT_SQL", held)
    engine = create_engine(postgres_settings)
    name = make_url(postgres_settings.database_url).database
    conn, writer = await admin_connection(name), await admin_connection(name)
    await writer.execute("CREATE TEMP TABLE written (n int)")
    reads = _Calls(monkeypatch, db_postgres, "version_fetch")
    try:
        await conn.execute("SELECT pg_advisory_lock(1717)")
        first = asyncio.ensure_future(committed_version(engine))
        deadline = time.monotonic() + 60
        while not await conn.fetchval(  # the first read is out, its snapshot taken
            "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND wait_event_type = 'Lock'",
            held,
        ):
            assert time.monotonic() < deadline, "the snapshot read never started"
            await asyncio.sleep(0.01)
        await writer.execute("INSERT INTO written VALUES (1)")  # committed
        later = [asyncio.ensure_future(committed_version(engine)) for _ in range(3)]
        await asyncio.sleep(0)  # they ask
        await conn.execute("SELECT pg_advisory_unlock(1717)")
        before, *after = [await first] + [await one for one in later]
        assert before is not None
        assert after[0] != before  # read after the commit
        assert after.count(after[0]) == 3  # the three share one read
        assert reads.count == 2
    finally:
        await conn.close()
        await writer.close()
        await dispose_engine(engine)


def test_a_value_is_given_back_only_at_its_version() -> None:
    cache = VersionedCache[bytes](maxsize=10, getsizeof=len)
    cache.put("k", (1, 7), b"abc")
    assert cache.get("k", (1, 7)) == b"abc"
    assert cache.get("k", (1, 8)) is None  # a commit since
    assert cache.get("k", (2, 7)) is None  # another reader's count
    assert cache.get("k", None) is None
    cache.put("n", None, b"x")  # no version: nothing kept
    assert cache.get("n", None) is None
    cache.put("big", (1, 7), b"x" * 11)  # larger than the whole cache: not kept
    assert cache.get("big", (1, 7)) is None


@pytest.mark.parametrize("sized", [True, False])
def test_the_cache_keeps_what_cachetools_lru_cache_keeps(sized: bool) -> None:
    """The same entries, evicted in the same order, as the `cachetools.LRUCache` it replaced
    (`VersionedCache` kept `(version, value)` in one), over random gets and puts: sizes up
    to and over the limit, replacements larger and smaller, stale versions."""
    from cachetools import Cache, LRUCache

    rng = random.Random(34)
    for _ in range(40):
        maxsize = rng.randint(1, 30)
        sizeof = len if sized else None
        ours = VersionedCache[bytes](maxsize, sizeof)
        theirs: LRUCache[str, tuple[int, bytes]] = LRUCache(
            maxsize, (lambda entry: len(entry[1])) if sized else None
        )
        for _ in range(300):
            key, version = rng.choice("abcdefgh"), rng.randint(1, 3)
            if rng.random() < 0.5:
                entry = theirs.get(key)
                expected = entry[1] if entry is not None and entry[0] == version else None
                assert ours.get(key, version) == expected
            else:
                value = b"x" * rng.randint(0, maxsize + 2)
                ours.put(key, version, value)
                with contextlib.suppress(ValueError):
                    theirs[key] = (version, value)
            # Compared as dicts each step (an order of use that differed would evict
            # differently), read without using them: `LRUCache.items()` would.
            kept = {k: Cache.__getitem__(theirs, k) for k in theirs}
            assert {k: v[:2] for k, v in ours._entries.items()} == kept
            assert ours._currsize == theirs.currsize


class _Maker:
    """An async maker the test lets finish, counting its calls."""

    def __init__(self, value: bytes, keep: bool = True, fail: bool = False) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.value, self.keep, self.fail = value, keep, fail

    async def __call__(self) -> tuple[bytes, bool]:
        self.calls += 1
        await self.release.wait()
        if self.fail:
            raise LookupError("no such system")
        return self.value, self.keep


async def _started(maker: _Maker, calls: int) -> None:
    while maker.calls < calls:  # the callers run up to their first wait
        await asyncio.sleep(0)


async def test_callers_asking_at_once_wait_for_the_one_that_makes_it() -> None:
    cache = VersionedCache[bytes](maxsize=10)
    maker = _Maker(b"body")
    asking = [asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker)) for _ in range(5)]
    await _started(maker, 1)
    maker.release.set()
    assert await asyncio.gather(*asking) == [b"body"] * 5
    assert maker.calls == 1
    assert cache.get("k", (1, 1)) == b"body"
    # At another version, it is made again.
    assert await cache.get_or_make("k", (1, 2), maker) == b"body"
    assert maker.calls == 2


@pytest.mark.parametrize("fail", [True, False])
async def test_when_the_maker_fails_or_may_not_keep_it_each_waiter_makes_its_own(
    fail: bool,
) -> None:
    cache = VersionedCache[bytes](maxsize=10)
    maker = _Maker(b"live", keep=False, fail=fail)
    asking = [asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker)) for _ in range(3)]
    await _started(maker, 1)
    maker.release.set()
    answers = await asyncio.gather(*asking, return_exceptions=True)
    assert maker.calls == 3
    if fail:
        assert all(isinstance(answer, LookupError) for answer in answers)
    else:
        assert answers == [b"live"] * 3
    assert cache.get("k", (1, 1)) is None


async def test_a_waiter_that_goes_away_does_not_stop_the_others() -> None:
    cache = VersionedCache[bytes](maxsize=10)
    maker = _Maker(b"body")
    making = asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker))
    leaving = asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker))
    staying = asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker))
    await _started(maker, 1)
    await asyncio.sleep(0)
    leaving.cancel()
    maker.release.set()
    assert (await making, await staying) == (b"body", b"body")
    assert leaving.cancelled()
    assert maker.calls == 1


async def test_a_maker_that_goes_away_leaves_each_waiter_to_make_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A maker alone makes no future (it asks nothing of the loop: `get_running_loop` is a
    `getpid()` per call); one that goes away (cancelled) lets its waiters make their own."""
    cache = VersionedCache[bytes](maxsize=10)
    asked: list[object] = []
    real = asyncio.get_running_loop
    monkeypatch.setattr(asyncio, "get_running_loop", lambda: asked.append(1) or real())
    alone = _Maker(b"alone")
    alone.release.set()
    assert await cache.get_or_make("a", (1, 1), alone) == b"alone"
    assert asked == []
    maker = _Maker(b"body")
    making = asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker))
    waiting = asyncio.ensure_future(cache.get_or_make("k", (1, 1), maker))
    await _started(maker, 1)
    await asyncio.sleep(0)
    making.cancel()
    await asyncio.sleep(0)
    maker.release.set()
    assert await waiting == b"body"
    assert making.cancelled()
    assert maker.calls == 2  # the waiter made its own


async def test_a_revoked_key_fails_at_once_in_the_other_worker(
    fresh: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = fresh
    lookups = _Calls(monkeypatch, auth_repository, "find_key_by_hash")
    async with _two_workers(settings) as (first, second):
        tenant = await make_tenant(first, Plan.ENTERPRISE)
        async with client_for(second, tenant.live) as client:
            # The first use writes `last_used_at` (a commit: the second reads the key again).
            for _ in range(2):
                assert (await client.get("/api/v1/account")).status_code == 200

            async def account() -> None:
                assert (await client.get("/api/v1/account")).status_code == 200

            attempts = await _asked_until_kept(account, lookups)
            assert settings.is_postgres or attempts == 1
            run_cli(settings_env(settings), "keys", "revoke", _live_id(tenant))
            refused = await client.get("/api/v1/account")
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "unauthorized"


async def test_a_plan_change_applies_at_once_in_the_other_worker(
    fresh: Settings, tmp_path: Path
) -> None:
    settings = fresh
    async with _two_workers(settings) as (first, second):
        tenant = await make_tenant(first, Plan.ENTERPRISE)
        async with client_for(second, tenant.live) as client:
            for _ in range(2):  # the first use writes `last_used_at`; the second is kept
                before = await client.get("/api/v1/account")
                assert before.headers["x-ratelimit-limit-minute"] == "300"
            run_cli(
                settings_env(settings),
                "accounts", "set-plan", tenant.account_id, "pro",
            )  # fmt: skip
            after = await client.get("/api/v1/account")
            assert after.headers["x-ratelimit-limit-minute"] == "60"
            assert after.json()["plan"] == "pro"
            # Pro is read-only: a write the key could make a moment ago is refused now.
            assert (await client.post("/api/v1/systems", json={})).status_code == 403


async def test_new_readings_and_a_deleted_system_are_seen_at_once_by_the_other_worker(
    fresh: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = fresh
    reads = _Calls(monkeypatch, readings_service, "read_readings")
    async with _two_workers(settings) as (first, second):
        tenant = await make_tenant(first, Plan.ENTERPRISE)
        async with (
            client_for(first, tenant.live) as writer,
            client_for(second, tenant.live) as reader,
        ):
            system_id = (await create_system(writer))["id"]
            assert (await upload(writer, system_id, quarter_series(DAY, 4, 100.0))).is_success
            assert await _energy(reader, system_id) == 400.0

            async def energy() -> None:
                assert await _energy(reader, system_id) == 400.0

            attempts = await _asked_until_kept(energy, reads)
            assert settings.is_postgres or attempts == 1

            assert (await upload(writer, system_id, quarter_series(DAY, 8, 60.0))).is_success
            counted = reads.count
            assert await _energy(reader, system_id) == 8 * 60.0
            assert reads.count == counted + 1  # read afresh

            assert (await writer.delete(f"/api/v1/systems/{system_id}")).status_code == 204
            gone = await reader.get(f"/api/v1/systems/{system_id}/readings", params=QUERY)
            assert gone.status_code == 404, gone.text


async def test_kept_bodies_give_the_garbage_collector_nothing_to_walk(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A fleet's worker keeps ~15k readings bodies. Their keys hold plain strings and
    datetimes, so the collector stops tracking each at its first collection: with the
    enums in them, every full collection walked all of them while requests waited."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        assert (await upload(client, system_id, quarter_series(DAY, 8, 10.0))).is_success
        for interval in ("15m", "1h", "1d"):
            query = {**QUERY, "interval": interval}
            response = await client.get(f"/api/v1/systems/{system_id}/readings", params=query)
            assert response.status_code == 200, response.text
    kept = [key for key in readings_router._BODIES._entries if system_id in key]
    assert len(kept) == 3
    gc.collect()
    assert not any(gc.is_tracked(key) for key in kept)


async def test_a_kept_body_is_never_given_to_another_tenant(
    fresh: Settings, tmp_path: Path
) -> None:
    settings = fresh
    async with running_app(settings) as app:
        owner, other = await make_tenant(app, Plan.ENTERPRISE), await make_tenant(app, Plan.PRO)
        async with client_for(app, owner.live) as client:
            system_id = (await create_system(client))["id"]
            assert await _energy(client, system_id) is None
        async with client_for(app, other.live) as client:
            response = await client.get(f"/api/v1/systems/{system_id}/readings", params=QUERY)
        assert response.status_code == 404
        async with client_for(app, owner.test) as client:  # the owner's sandbox: not there
            response = await client.get(f"/api/v1/systems/{system_id}/readings", params=QUERY)
        assert response.status_code == 404


async def _asked_until_kept(ask: Callable[[], Awaitable[None]], reads: _Calls) -> int:
    """`ask()` again until an answer comes without the read `reads` counts (the key, the
    readings), from what was kept; returns how many asks it took. On SQLite the first
    (nothing else writes to the test's database); on PostgreSQL the version is the snapshot
    of the whole server, which the suite's other tests keep changing, so an ask may read
    afresh. Never kept is a failure."""
    deadline = time.monotonic() + 60
    attempts = 0
    while True:
        attempts += 1
        counted = reads.count
        await ask()
        if reads.count == counted:
            return attempts
        assert time.monotonic() < deadline, "never answered from what was kept"


def _live_id(tenant: Tenant) -> str:
    return tenant.key_ids[Environment.LIVE]


def test_two_serving_workers_see_a_revocation_and_new_readings_at_once(
    fresh: Settings, tmp_path: Path
) -> None:
    """The real thing: `serve --workers 2` (with Redis for the limits), both workers having
    answered the key and the readings before the changes."""
    need_service("Redis", redis_available())
    settings = fresh

    async def make() -> Tenant:
        async with running_app(settings) as app:
            return await make_tenant(app, Plan.ENTERPRISE)

    tenant = asyncio.run(make())
    env = settings_env(
        settings,
        SOLARAPI_REDIS_URL=REDIS_URL,
        SOLARAPI_RATE_LIMIT_SCALE="100",
        # The refusals below count in 127.0.0.1's window, shared on Redis with other tests.
        SOLARAPI_ANONYMOUS_PER_MINUTE="100000",
        SOLARAPI_LOG_LEVEL="INFO",
    )
    headers = {"Authorization": f"Bearer {tenant.live}"}
    # New connections each time, so the kernel hands them to either worker.
    no_reuse = httpx.Limits(max_keepalive_connections=0)
    with (
        served(env, "--workers", "2") as server,
        httpx.Client(base_url=server.base, headers=headers, limits=no_reuse, timeout=30) as client,
    ):
        created = client.post("/api/v1/systems", json=system_body())
        assert created.status_code == 201, created.text
        system_id = created.json()["id"]
        path = f"/api/v1/systems/{system_id}/readings"
        first = client.post(path, json={"readings": quarter_series(DAY, 4, 100.0)})
        assert first.is_success, first.text

        def both_answered(n: int, energy_wh: float) -> None:
            """Read until both workers answered the readings at least twice since the
            last change (so each has kept the body), every answer `energy_wh`."""
            pids: dict[object, int] = {}
            while min(pids.values(), default=0) < 2 or len(pids) < 2:
                assert sum(pids.values()) < 400, f"one worker took every connection: {pids}"
                marker = f"both-{n}-{sum(pids.values())}"
                answer = client.get(path, params=QUERY, headers={"X-Request-Id": marker})
                assert answer.status_code == 200, answer.text
                assert answer.json()["meta"]["totals"]["energy_wh"] == energy_wh
                pid = _logged_pid(server, marker)
                pids[pid] = pids.get(pid, 0) + 1

        both_answered(1, 4 * 100.0)
        again = client.post(path, json={"readings": quarter_series(DAY, 8, 60.0)})
        assert again.is_success, again.text
        both_answered(2, 8 * 60.0)
        run_cli(env, "keys", "revoke", _live_id(tenant))
        refused: set[object] = set()
        sent = 0
        while len(refused) < 2:  # until both workers have refused it
            assert sent < 400, "one worker took every connection"
            marker = f"revoked-{sent}"
            answer = client.get(path, params=QUERY, headers={"X-Request-Id": marker})
            assert answer.status_code == 401, answer.text
            refused.add(_logged_pid(server, marker))
            sent += 1


def _logged_pid(server: Server, request_id: str) -> object:
    """The process that answered `request_id`, from its request line (written just after
    the response is sent; the deadline only bounds a broken run)."""
    deadline = time.monotonic() + 30
    while True:
        for line in server.lines():
            if line.get("request_id") == request_id and line.get("msg") == "request":
                return line["pid"]
        assert time.monotonic() < deadline, f"no request line for {request_id}"
        time.sleep(0.02)


# --- The auth epoch: callers kept while no key or account changes (migration 0020) ---------


class _OtherConnection:
    """A connection of the test's own to the app's database, outside the app (as another
    process's would be): `sqlite3` or asyncpg, autocommit; `run` takes one or more
    statements (literals only: the two drivers spell parameters differently)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._sqlite: sqlite3.Connection | None = None
        self._pg: Any = None

    async def __aenter__(self) -> _OtherConnection:
        url = make_url(self._settings.database_url)
        if self._settings.is_postgres:
            self._pg = await admin_connection(url.database)
        else:
            self._sqlite = sqlite3.connect(str(url.database), isolation_level=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pg is not None:
            await self._pg.close()
        if self._sqlite is not None:
            self._sqlite.close()

    async def run(self, sql: str, row_id: str) -> None:
        """One statement, `:id` bound to `row_id`."""
        if self._pg is not None:
            await self._pg.execute(sql.replace(":id", "$1"), row_id)
        else:
            assert self._sqlite is not None
            self._sqlite.execute(sql, {"id": row_id})

    async def rolled_back(self, sql: str, row_id: str) -> None:
        """`run` in a transaction that is rolled back."""
        await self._plain("BEGIN")
        await self.run(sql, row_id)
        await self._plain("ROLLBACK")

    async def _plain(self, sql: str) -> None:
        if self._pg is not None:
            await self._pg.execute(sql)
        else:
            assert self._sqlite is not None
            self._sqlite.execute(sql)


class _KeyStatements:
    """The statements reading `api_keys` that the app's engine sends to the database, seen at
    the driver: a query logger on each asyncpg connection as the pool hands it out
    (PostgreSQL), a trace callback on the event loop's reader, where the gateway's reads go,
    and on each aiosqlite connection as the pool hands it out (SQLite)."""

    def __init__(self, app: FastAPI) -> None:
        self.sql: list[str] = []
        self._watched: set[int] = set()
        engine = app.state.engine.sync_engine
        event.listen(engine.pool, "checkout", self._checkout)
        if app.state.settings.is_postgres:
            # The connections the loop keeps between lone reads were checked out before.
            kept = db_postgres._LONE_READERS.get(engine)
            for held in kept.idle if kept is not None else ():
                self._watch(held.connection)
        else:
            reader = db_sqlite.loop_reader(engine)
            assert reader is not None
            reader.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        if "api_keys" in sql:
            self.sql.append(sql)

    def _checkout(self, dbapi_connection: Any, record: Any, proxy: Any) -> None:
        self._watch(dbapi_connection.driver_connection)

    def _watch(self, driver: Any) -> None:
        if id(driver) in self._watched:
            return
        self._watched.add(id(driver))
        if isinstance(driver, asyncpg.Connection):
            driver.add_query_logger(lambda logged: self._seen(logged.query))
        else:  # aiosqlite: its sqlite3 connection, used on aiosqlite's thread
            driver._conn.set_trace_callback(self._seen)

    async def count(self) -> int:
        """How many so far (asyncpg calls its loggers one turn of the loop after the query)."""
        await asyncio.sleep(0)
        return len(self.sql)


def _pinned(clock: TestClock) -> TestClock:
    """The apps' clock held still, so no request of the test is due to refresh its key's
    `last_used_at` (a write, which reads the key again) however slowly the machine runs."""
    clock.pinned = time.time()
    return clock


async def test_the_auth_epoch_moves_with_keys_and_accounts_and_nothing_else(
    fresh: Settings, tmp_path: Path
) -> None:
    settings = fresh
    async with running_app(settings) as app, _OtherConnection(settings) as other:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        key, account = _live_id(tenant), tenant.account_id
        async with client_for(app, tenant.live) as client:
            system_id = (await create_system(client))["id"]

            async def versions() -> Any:
                read = await committed_version(app.state.engine)
                assert read is not None
                return read

            async def leaves_it(change: Callable[[], Awaitable[object]]) -> None:
                before = await versions()
                await change()
                assert (await versions()).auth == before.auth

            async def moves_it(sql: str, row_id: str) -> None:
                before = await versions()
                await other.run(sql, row_id)
                after = await versions()
                assert after.auth != before.auth, sql
                assert after.data != before.data

            before = await versions()
            readings = await upload(client, system_id, quarter_series(DAY, 4, 100.0))
            assert readings.is_success
            assert (await versions()).data != before.data  # a commit: the data moved
            await leaves_it(lambda: upload(client, system_id, quarter_series(DAY, 8, 50.0)))
            await leaves_it(  # written once a minute per key in use: not part of what is kept
                lambda: other.run(
                    "UPDATE api_keys SET last_used_at = '2030-01-01 00:00:00.000000' WHERE id = :id",
                    key,
                )
            )
            await leaves_it(  # the same values written again
                lambda: other.run(
                    "UPDATE accounts SET name = name, plan = plan WHERE id = :id", account
                )
            )
            await leaves_it(  # rolled back
                lambda: other.rolled_back(
                    "UPDATE api_keys SET revoked_at = '2030-01-01 00:00:00.000000' WHERE id = :id",
                    key,
                )
            )
        await moves_it("UPDATE api_keys SET name = 'renamed' WHERE id = :id", key)
        await moves_it("UPDATE accounts SET plan = 'pro' WHERE id = :id", account)
        await moves_it("UPDATE accounts SET name = 'Renamed' WHERE id = :id", account)
        await moves_it(
            "UPDATE accounts SET disabled_at = '2030-01-01 00:00:00.000000' WHERE id = :id", account
        )
        await moves_it(
            "UPDATE api_keys SET revoked_at = '2030-01-01 00:00:00.000000' WHERE id = :id", key
        )
        await moves_it("DELETE FROM api_keys WHERE id = :id", tenant.key_ids[Environment.TEST])
        copy = (
            "INSERT INTO api_keys (id, account_id, name, environment, key_hash, display,"
            " created_at) SELECT 'key_copy', account_id, name, environment, 'copy', display,"
            " created_at FROM api_keys WHERE id = :id"
        )
        await moves_it(copy, key)
        await moves_it("DELETE FROM accounts WHERE id = :id", account)  # keys go with it


def test_every_column_of_keys_and_accounts_is_watched_but_last_used_at(
    fresh: Settings, tmp_path: Path
) -> None:
    """A column added to `api_keys` or `accounts` later may be one a Principal is made of:
    the epoch's triggers (migration 0020) must then name it, or a change to it would not
    reach the kept callers. `last_used_at` alone is left out on purpose."""
    settings = fresh
    if settings.is_postgres:
        definitions = (
            "SELECT c.relname, pg_get_triggerdef(t.oid) FROM pg_trigger t"
            " JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname LIKE 'auth_epoch_%_update'"
        )
    else:
        definitions = (
            "SELECT tbl_name, sql FROM sqlite_master"
            " WHERE type = 'trigger' AND name LIKE 'auth_epoch_%_update'"
        )

    async def read() -> dict[str, str]:
        engine = create_oneshot_engine(settings)
        try:
            async with engine.connect() as connection:
                rows = (await connection.execute(text(definitions))).all()
                return {str(row[0]): str(row[1]) for row in rows}
        finally:
            await dispose_engine(engine)

    triggers = {table: sql.lower() for table, sql in asyncio.run(read()).items()}
    assert set(triggers) == {"api_keys", "accounts"}
    for name, sql in triggers.items():
        listed = re.search(r"after update of (.*?) on ", sql)
        assert listed is not None, sql
        of = {column.strip() for column in listed.group(1).split(",")}
        for column in Base.metadata.tables[name].columns:
            watched = not (name == "api_keys" and column.name == "last_used_at")
            compared = re.search(rf"\bold\.{column.name}\b", sql) is not None
            assert (column.name in of, compared) == (watched, watched), f"{name}.{column.name}"


async def test_commits_of_readings_do_not_make_the_next_request_read_the_key(
    fresh: Settings, tmp_path: Path, clock: TestClock
) -> None:
    """The fleet's case: loggers upload all day (each upload a commit) while a worker
    answers an integration's reads. The worker reads the key once; after every upload it
    reads the readings afresh (they changed) but not the key."""
    settings = fresh
    clock = _pinned(clock)
    async with running_app(settings, clock) as writer_app, running_app(settings, clock) as app:
        tenant = await make_tenant(writer_app, Plan.ENTERPRISE)
        async with (
            client_for(writer_app, tenant.live) as writer,
            client_for(app, tenant.live) as reader,
        ):
            system_id = (await create_system(writer))["id"]
            for _ in range(2):  # the first use writes `last_used_at`; the second keeps it
                assert (await reader.get("/api/v1/account")).status_code == 200
            key_reads = _KeyStatements(app)
            for n in range(1, 11):
                readings = quarter_series(DAY, n, 10.0)
                assert (await upload(writer, system_id, readings)).is_success
                assert await _energy(reader, system_id) == n * 10.0  # read afresh
            assert await key_reads.count() == 0, key_reads.sql
            # What it counts is real: a change to the key is read at the next request.
            async with _OtherConnection(settings) as other:
                await other.run(
                    "UPDATE api_keys SET name = 'renamed' WHERE id = :id", _live_id(tenant)
                )
            renamed = await reader.get("/api/v1/account")
            assert renamed.json()["key"]["name"] == "renamed"
            assert await key_reads.count() == 1, key_reads.sql


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        (("keys", "revoke", "{key}"), True),
        (("accounts", "disable", "{account}"), True),
        (("accounts", "set-plan", "{account}", "pro"), False),
    ],
    ids=["revoked key", "disabled account", "plan change"],
)
async def test_a_change_to_the_caller_is_seen_at_once_while_readings_commit(
    fresh: Settings, tmp_path: Path, clock: TestClock, change: tuple[str, ...], refused: bool
) -> None:
    """The guarantee, under the fleet's load: another account's logger commits uploads
    through another worker all along, while the change is made by the operator's command
    (an engine of its own), and the first request after the command returns sees it."""
    settings = fresh
    clock = _pinned(clock)
    async with running_app(settings, clock) as writer_app, running_app(settings, clock) as app:
        tenant = await make_tenant(writer_app, Plan.ENTERPRISE)
        logger = await make_tenant(writer_app, Plan.ENTERPRISE)
        async with (
            client_for(writer_app, logger.live) as writer,
            client_for(app, tenant.live) as reader,
        ):
            system_id = (await create_system(writer))["id"]
            for _ in range(2):  # the first use writes `last_used_at`; the second keeps it
                kept = await reader.get("/api/v1/account")
                assert kept.status_code == 200
                assert kept.json()["plan"] == "enterprise"
            uploads = 0
            uploaded = asyncio.Event()
            done = asyncio.Event()

            async def upload_all_along() -> None:
                nonlocal uploads
                while not done.is_set():
                    n = uploads % 96 + 1
                    assert (await upload(writer, system_id, quarter_series(DAY, n))).is_success
                    uploads += 1
                    uploaded.set()

            uploading = asyncio.ensure_future(upload_all_along())

            async def more_uploads(count: int) -> None:
                target = uploads + count
                while uploads < target:
                    uploaded.clear()
                    waiting = asyncio.ensure_future(uploaded.wait())
                    await asyncio.wait({waiting, uploading}, return_when=asyncio.FIRST_COMPLETED)
                    waiting.cancel()
                    if uploading.done():
                        uploading.result()  # an upload failed: say why instead of waiting

            try:
                await more_uploads(3)  # commits are going on, and the key is still kept
                key_reads = _KeyStatements(app)
                assert (await reader.get("/api/v1/account")).status_code == 200
                assert await key_reads.count() == 0, key_reads.sql
                names = {"key": _live_id(tenant), "account": tenant.account_id}
                command = [part.format(**names) for part in change]
                await asyncio.to_thread(run_cli, settings_env(settings), *command)
                after = await reader.get("/api/v1/account")
                await more_uploads(3)  # and later, while the uploads go on
                later = await reader.get("/api/v1/account")
                assert later.status_code == after.status_code
            finally:
                done.set()
                await uploading
        assert uploads >= 6
        if refused:
            assert after.status_code == 401, after.text
            assert after.json()["code"] == "unauthorized"
        else:
            assert after.status_code == 200, after.text
            assert after.json()["plan"] == "pro"
            assert after.headers["x-ratelimit-limit-minute"] == "60"
