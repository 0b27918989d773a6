"""The database layer's fast paths: DriverQuery, SQLite reads on the event loop, and the
SQLite dialect that skips empty commits. Each must give exactly what SQLAlchemy's own path
gives; only the cost differs."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import aiosqlite.core
import asyncpg
import pytest
from fastapi import FastAPI, Request
from sqlalchemy import bindparam, event, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import QueuePool

from solarapi.config import Settings
from solarapi.db import (
    REQUEST_SESSION,
    DriverQuery,
    LazySession,
    create_engine,
    create_oneshot_engine,
    dispose_engine,
    fetch_rows,
    get_session,
    lazy_session,
    sessionmaker_for,
    sqlite_fetchall,
    untouched,
)
from solarapi.db import postgres as db_postgres
from solarapi.db.postgres import SNAPSHOT_SQL
from solarapi.dbfaults import DatabaseUnreachable, is_database_unavailable
from solarapi.kit.ids import new_id
from solarapi.models.systems import System, SystemRecord
from solarapi.systems import repository
from tests.support import client_for, make_tenant, running_app


def _new_system(account_id: str, **changes: Any) -> System:
    now = datetime(2025, 3, 30, 1, 2, 3, 456789, tzinfo=UTC)
    values: dict[str, Any] = {
        "id": new_id("sys"), "account_id": account_id, "environment": "live", "name": "Driver query",
        "status": "active", "data_source": "metered", "capacity_kwp": 7.25, "inverter_capacity_kw": None,
        "latitude": -34.93, "longitude": 138.6, "timezone": "Australia/Adelaide", "country": "AU",
        "tilt_deg": 20.0, "azimuth_deg": 0.0, "market_zone": None, "installed_on": date(2024, 2, 29),
        "first_reading_at": datetime(2025, 1, 1, 13, 30, tzinfo=UTC), "last_reading_at": None,
        "created_at": now, "updated_at": now,
    }  # fmt: skip
    values.update(changes)
    return System(**values)


def _columns(system: System | SystemRecord) -> dict[str, Any]:
    return {column.key: getattr(system, column.key) for column in System.__table__.columns}


async def test_record_equals_the_orm_row_and_refuses_writes(app: FastAPI) -> None:
    tenant = await make_tenant(app, _plan("enterprise"))
    system = _new_system(tenant.account_id)
    async with app.state.sessionmaker() as session, session.begin():
        session.add(system)
    async with app.state.sessionmaker() as session:
        orm = await session.get(System, system.id)
        assert orm is not None
        record = await repository.get_record(session, system.id)
        assert record is not None
        assert _columns(record) == _columns(orm)
        # Types as the ORM gives them, not as the driver stores them (SQLite: text).
        assert record.created_at == datetime(2025, 3, 30, 1, 2, 3, 456789, tzinfo=UTC)
        assert record.created_at.tzinfo is UTC
        assert record.installed_on == date(2024, 2, 29)
        assert record.last_reading_at is None
        # Frozen: a write fails at once instead of vanishing.
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.name = "renamed"  # type: ignore[misc]
        assert await repository.get_record(session, "sys_missing") is None


async def test_api_request_uses_one_session_closed_after_the_response(app: FastAPI) -> None:
    tenant = await make_tenant(app, _plan("pro"))
    seen: list[AsyncSession] = []

    original = app.state.sessionmaker

    def counting_maker(*args: Any, **kwargs: Any) -> AsyncSession:
        session: AsyncSession = original(*args, **kwargs)
        seen.append(session)
        return session

    app.state.sessionmaker = counting_maker
    try:
        async with client_for(app, tenant.live) as client:
            response = await client.get("/api/v1/systems")
    finally:
        app.state.sessionmaker = original
    assert response.status_code == 200, response.text
    # The gateway's session is the endpoint's; none is left holding a connection.
    assert len(seen) == 1
    assert seen[0].get_transaction() is None


def _plan(name: str) -> Any:
    from solarapi.kit.plans import Plan

    return Plan(name)


async def _started(settings: Settings) -> AsyncIterator[FastAPI]:
    """An app on one database (the shared `app` fixture runs each test on both)."""
    async with running_app(settings) as application:
        yield application


@pytest.fixture(scope="module")
async def sqlite_app(sqlite_settings: Settings) -> AsyncIterator[FastAPI]:
    async for application in _started(sqlite_settings):
        yield application


async def test_sqlite_read_inside_a_write_sees_the_write_and_others_do_not(
    sqlite_app: FastAPI,
) -> None:
    tenant = await make_tenant(sqlite_app, _plan("enterprise"))
    maker = sqlite_app.state.sessionmaker
    system = _new_system(tenant.account_id)
    async with maker() as writer, maker() as other:
        writer.add(system)
        await writer.flush()  # SQLite has begun the write transaction
        assert (await repository.get_record(writer, system.id)) is not None
        assert (await repository.get_record(other, system.id)) is None
        await writer.commit()
        assert (await repository.get_record(other, system.id)) is not None


async def test_sqlite_read_hands_nothing_to_aiosqlite_outside_a_write(
    sqlite_app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_tenant(sqlite_app, _plan("enterprise"))
    async with client_for(sqlite_app, tenant.live) as client:
        created = await client.post(
            "/api/v1/systems",
            json={"name": "Hops", "capacity_kwp": 5,
                  "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"}},
        )  # fmt: skip
        assert created.status_code == 201, created.text
        path = f"/api/v1/systems/{created.json()['id']}/readings"
        await client.get(path)  # the key's last_used_at write happens on its first use
        calls: list[str] = []
        original = aiosqlite.core.Connection._execute

        async def counting(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(getattr(fn, "__name__", repr(fn)))
            return await original(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]

        monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counting)
        response = await client.get(path, params={"interval": "1h"})
    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) >= 24
    # Key, system and rollup rows read on the loop; no empty commit or rollback either.
    assert calls == []


async def test_sqlite_busy_database_reads_through_aiosqlite_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    # A rollback-journal database (not WAL): an exclusive transaction shuts readers out, which
    # in WAL mode only WAL recovery does.
    path = tmp_path / "busy.db"
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.execute("INSERT INTO t VALUES (42)")
    setup.commit()
    setup.close()
    engine = create_async_engine(f"sqlite+solarapi:///{path}")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    released: list[float] = []

    def release() -> None:
        blocker.execute("ROLLBACK")
        released.append(time.monotonic())

    try:
        asyncio.get_running_loop().call_later(0.3, release)
        async with async_sessionmaker(engine)() as session:
            rows = await sqlite_fetchall(session, "SELECT x FROM t", ())
        finished = time.monotonic()
        # The loop stayed free to run `release`, and the read waited for it in aiosqlite.
        assert rows == [(42,)]
        assert released
        assert finished >= released[0]
    finally:
        blocker.close()
        await dispose_engine(engine)


async def test_sqlite_dialect_still_commits_real_writes(sqlite_app: FastAPI) -> None:
    tenant = await make_tenant(sqlite_app, _plan("enterprise"))
    system = _new_system(tenant.account_id)
    async with sqlite_app.state.sessionmaker() as session:
        session.add(system)
        await session.commit()
    async with sqlite_app.state.sessionmaker() as session:
        assert await session.get(System, system.id) is not None
    async with sqlite_app.state.sessionmaker() as session:
        loaded = await session.get(System, system.id)
        assert loaded is not None
        loaded.name = "Renamed"
        await session.flush()
        await session.rollback()  # a real rollback of a real transaction
    async with sqlite_app.state.sessionmaker() as session:
        loaded = await session.get(System, system.id)
        assert loaded is not None
        assert loaded.name == "Driver query"


# --- PostgreSQL: lone reads on a connection of their own -------------------------------------


@pytest.fixture(scope="module")
async def pg_app(postgres_settings: Settings) -> AsyncIterator[FastAPI]:
    async for application in _started(postgres_settings):
        yield application


async def test_pg_lone_reads_leave_the_session_alone_and_writes_see_their_own(
    pg_app: FastAPI,
) -> None:
    tenant = await make_tenant(pg_app, _plan("enterprise"))
    maker = pg_app.state.sessionmaker
    system = _new_system(tenant.account_id)
    async with maker() as writer, maker() as other:
        assert (await repository.get_record(other, "sys_missing")) is None
        assert untouched(other)  # the read borrowed a pooled connection, not the session's
        writer.add(system)
        await writer.flush()  # inserted in the writer's open transaction
        assert (await repository.get_record(writer, system.id)) is not None
        assert (await repository.get_record(other, system.id)) is None
        await writer.commit()
        assert (await repository.get_record(other, system.id)) is not None
        assert untouched(other)


async def test_pg_driver_query_compiles_on_a_connection_closed_when_returned(
    postgres_settings: Settings,
) -> None:
    # Without pooling every connection is closed when it goes back: a DriverQuery must read
    # the statement's column types before that (a first request under load, with the pool's
    # overflow connections closing on return, failed this way).
    engine = create_oneshot_engine(postgres_settings)
    try:
        query = DriverQuery(
            select(System.id, System.created_at).where(System.id == bindparam("id"))
        )
        async with sessionmaker_for(engine)() as session:
            assert await query.first(session, {"id": "sys_missing"}) is None
            assert await fetch_rows(session, "SELECT 1", ()) == [(1,)]
    finally:
        await dispose_engine(engine)


async def _terminate(settings: Settings, pids: list[int]) -> None:
    """PostgreSQL's backends `pids` terminated, and gone on the server when this returns."""
    admin = create_oneshot_engine(settings)  # not from the pool under test
    try:
        async with admin.begin() as connection:
            for pid in pids:
                await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            # (A transaction sees one record of the statistics unless it is cleared.)
            deadline = time.monotonic() + 60
            while await connection.scalar(
                text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)"),
                {"pids": pids},
            ):
                assert time.monotonic() < deadline, "the backends were not terminated"
                await asyncio.sleep(0.02)
                await connection.execute(text("SELECT pg_stat_clear_snapshot()"))
    finally:
        await admin.dispose()


async def test_pg_connection_closed_under_a_read_does_not_go_back_to_the_pool(
    postgres_settings: Settings,
) -> None:
    settings = postgres_settings.model_copy(update={"db_pool_size": 1})
    engine = create_engine(settings)
    maker = sessionmaker_for(engine, settings)
    try:
        async with maker() as session:
            ((first_pid,),) = await fetch_rows(session, "SELECT pg_backend_pid()", ())
            assert await fetch_rows(session, "SELECT pg_backend_pid()", ()) == [(first_pid,)]
            await _terminate(postgres_settings, [first_pid])
            # Whether our side has read the server's goodbye yet (InterfaceError: connection
            # is closed), finds out mid-read (ConnectionDoesNotExistError) or reads it while
            # starting the statement (InternalClientError "cannot switch to state 12", seen
            # once in ten runs) is a race that depends on the machine's speed; all are the
            # same outage.
            with pytest.raises(DatabaseUnreachable) as failed:
                await fetch_rows(session, "SELECT pg_backend_pid()", ())
            assert isinstance(
                failed.value.__cause__,
                asyncpg.InterfaceError
                | asyncpg.ConnectionDoesNotExistError
                | asyncpg.InternalClientError,
            )
            assert is_database_unavailable(failed.value)
            # The very next read gets a working connection, not the dead one back.
            ((second_pid,),) = await fetch_rows(session, "SELECT pg_backend_pid()", ())
            assert second_pid != first_pid
    finally:
        await dispose_engine(engine)


async def _lone_pids(engine: Any, count: int) -> list[int]:
    """The backends of `count` lone reads made at once (each on its own connection)."""
    async with sessionmaker_for(engine)() as session:
        rows = await asyncio.gather(
            *(fetch_rows(session, "SELECT pg_backend_pid()", ()) for _ in range(count))
        )
    return [int(row[0][0]) for row in rows]


async def test_pg_lone_reads_keep_a_few_connections_between_them(
    postgres_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads outside a transaction keep up to a quarter of the pool (at most 4) checked out
    between them, reuse those, give back the rest, give back one idle past `HELD_IDLE_S`,
    and give back all when the engine is disposed."""
    settings = postgres_settings.model_copy(update={"db_pool_size": 8})  # 2 kept
    engine = create_engine(settings)
    pool = engine.sync_engine.pool
    assert isinstance(pool, QueuePool)
    try:
        burst = await _lone_pids(engine, 6)
        assert len(set(burst)) == 6  # one connection each: reads at once never share
        assert pool.checkedout() == 2
        kept = set(await _lone_pids(engine, 2))
        assert len(kept) == 2
        assert kept <= set(burst)
        assert pool.checkedout() == 2
        monkeypatch.setattr(db_postgres, "HELD_IDLE_S", -1.0)  # every idle one is too old
        await _lone_pids(engine, 1)  # the oldest goes back; the other serves and stays
        assert pool.checkedout() == 1
    finally:
        await dispose_engine(engine)
    assert pool.checkedout() == 0
    assert engine.sync_engine not in db_postgres._LONE_READERS


async def test_pg_lone_reads_drop_every_kept_connection_the_server_closed(
    postgres_settings: Settings,
) -> None:
    """A database restart closes every kept connection: the read that finds out fails as
    any read on a lost connection does (503), and the kept ones of that time are dropped
    with it, so the very next read works instead of failing on the next dead one."""
    settings = postgres_settings.model_copy(update={"db_pool_size": 16})  # 4 kept
    engine = create_engine(settings)
    try:
        pool = engine.sync_engine.pool
        assert isinstance(pool, QueuePool)
        kept = await _lone_pids(engine, 4)
        assert pool.checkedout() == 4
        await _terminate(postgres_settings, kept)
        async with sessionmaker_for(engine)() as session:
            with pytest.raises(DatabaseUnreachable):
                await fetch_rows(session, "SELECT pg_backend_pid()", ())
            ((pid,),) = await fetch_rows(session, "SELECT pg_backend_pid()", ())
        assert pid not in kept
        assert pool.checkedout() == 1
    finally:
        await dispose_engine(engine)


@pytest.mark.parametrize(
    ("interval", "rollup"), [("1h", "reading_hours"), ("1d", "reading_days")], ids=["1h", "1d"]
)
async def test_pg_readings_get_is_two_statements_and_begins_no_transaction(
    pg_app: FastAPI, monkeypatch: pytest.MonkeyPatch, interval: str, rollup: str
) -> None:
    """A local calendar's range needs the system's zone, and is still read with the system:
    the rows of the days any zone could widen it to, in the same statement."""
    tenant = await make_tenant(pg_app, _plan("pro"))
    system = _new_system(tenant.account_id, latitude=52.0, longitude=5.0, timezone="UTC")
    async with pg_app.state.sessionmaker() as session, session.begin():
        session.add(system)
    async with client_for(pg_app, tenant.live) as client:
        path = f"/api/v1/systems/{system.id}/readings"
        assert (await client.get(path)).status_code == 200  # the key's last_used_at write
        driver: list[str] = []
        adapter: list[str] = []
        original = asyncpg.Connection.fetch

        async def counting(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            driver.append(query)
            return await original(self, query, *args, **kwargs)

        def on_execute(*args: Any) -> None:
            adapter.append(str(args[2]))

        monkeypatch.setattr(asyncpg.Connection, "fetch", counting)
        engine = pg_app.state.engine.sync_engine
        event.listen(engine, "before_cursor_execute", on_execute)
        try:
            response = await client.get(path, params={"interval": interval})
        finally:
            event.remove(engine, "before_cursor_execute", on_execute)
    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) >= (24 if interval == "1h" else 1)
    # The key, then the system with its rollup's rows; nothing through the session (no BEGIN).
    # Beside them the database's version (`committed_version`), one read shared by the
    # requests that ask at once.
    driver = [query for query in driver if query != SNAPSHOT_SQL]
    assert len(driver) == 2, driver
    assert "api_keys" in driver[0]
    assert "FROM systems" in driver[1]
    assert rollup in driver[1]
    assert adapter == []


@pytest.mark.parametrize("own", [False, True], ids=["request-session", "own-session"])
async def test_an_endpoint_error_rolls_back_before_it_leaves_the_session_dependency(
    app: FastAPI, own: bool
) -> None:
    """FastAPI throws an endpoint's exception into `get_session` at its `yield`: the
    transaction must be rolled back right there, before the error response is made and the
    gateway closes the session — not later, in a task of its own, when an abandoned inner
    generator is collected (which raced the gateway's close: IllegalStateChangeError)."""
    session = app.state.sessionmaker()
    state = {} if own else {REQUEST_SESSION: session}
    request = Request({"type": "http", "state": state, "app": app, "headers": []})
    units: list[AsyncSession] = []

    async def failing_endpoint() -> None:
        async with asynccontextmanager(get_session)(request) as unit:
            units.append(unit)
            await unit.execute(text("SELECT 1"))  # begins the unit's transaction
            assert unit.in_transaction()
            raise RuntimeError("the endpoint failed")

    try:
        with pytest.raises(RuntimeError, match="the endpoint failed"):
            await failing_endpoint()
        assert not units[0].in_transaction()
        assert (units[0] is session) is not own
    finally:
        await session.close()


async def test_lazy_session_reads_unbuilt_and_builds_what_the_maker_makes(app: FastAPI) -> None:
    """A request's session is built on first use: the reads of an uncached GET (the
    database's own connections) leave it unbuilt; anything else builds `maker()`'s."""
    maker = app.state.sessionmaker
    lazy = lazy_session(maker)
    made = maker()
    try:
        assert isinstance(lazy, LazySession)
        assert isinstance(lazy, AsyncSession)
        assert not lazy.built
        assert lazy.get_transaction() is None
        assert not lazy.in_transaction()
        assert lazy.get_bind() is made.get_bind()
        assert untouched(lazy)
        rows = await fetch_rows(lazy, "SELECT 1", ())
        assert [tuple(row) for row in rows] == [(1,)]
        assert not lazy.built
        assert not hasattr(lazy, "__no_such_dunder__")  # looked up, not built for
        assert not lazy.built
        await lazy.execute(text("SELECT 1"))  # begins a transaction: built
        assert lazy.built
        assert lazy.in_transaction()
        assert lazy.get_transaction() is not None
        assert not untouched(lazy)
        ours, theirs = lazy.sync_session, made.sync_session
        assert type(ours) is type(theirs)
        assert ours.bind is theirs.bind
        assert (ours.expire_on_commit, ours.autoflush) == (
            theirs.expire_on_commit,
            theirs.autoflush,
        )
        assert lazy.info == made.info
        assert lazy.get_bind() is made.get_bind()
        await lazy.commit()
        assert untouched(lazy)
        with pytest.raises(AttributeError, match="no_such_attribute"):
            lazy.no_such_attribute  # noqa: B018
    finally:
        await lazy.close()
        await made.close()


async def test_lazy_session_builds_on_every_attribute_async_session_sets(app: FastAPI) -> None:
    """`LazySession` builds when an attribute `AsyncSession.__init__` sets is missing: each
    must be missing from the class too (a class default would be found instead, unbuilt),
    but `sync_session_class`, whose class default is what `__init__` would set."""
    made = app.state.sessionmaker()
    try:
        names = set(vars(made))
        assert {"sync_session", "_proxied"} <= names
        for name in names - {"sync_session_class"}:
            assert not hasattr(AsyncSession, name), name
        assert made.sync_session_class is AsyncSession.sync_session_class
        lazy = lazy_session(app.state.sessionmaker)
        assert lazy.sync_session is not None
        assert lazy.built
        assert set(vars(lazy)) == names
        await lazy.close()
    finally:
        await made.close()


async def test_lazy_session_only_for_a_plain_maker_of_one_engine(app: FastAPI) -> None:
    plain = app.state.sessionmaker
    assert type(lazy_session(plain)) is LazySession
    other = async_sessionmaker(plain.kw["bind"], class_=_OtherSession)
    assert type(lazy_session(other)) is _OtherSession
    assert type(lazy_session(lambda: plain())) is AsyncSession


class _OtherSession(AsyncSession):
    pass
