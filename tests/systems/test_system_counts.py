"""`system_counts`, the list's totals kept by triggers on `systems` (migration 0026), on both
databases: equal to the systems themselves after every kind of write, filtered or not,
through the API and under concurrent moves; counted from the systems already there when the
migration runs; on PostgreSQL a move's two rows taken in key order."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from tests.support import (
    DATABASES,
    Tenant,
    blank_settings,
    client_for,
    make_tenant,
    run_cli,
    running_app,
    settings_env,
)
from tests.systems.factories import create_system

_COUNTED = (
    "SELECT account_id, environment, status, coalesce(market_zone, '') AS zone, count(*)"
    " FROM systems WHERE account_id = :a GROUP BY account_id, environment, status,"
    " coalesce(market_zone, '')"
)
_KEPT = (
    "SELECT account_id, environment, status, market_zone, systems FROM system_counts"
    " WHERE account_id = :a"
)


async def _counts(engine: AsyncEngine, account_id: str) -> tuple[set[tuple], set[tuple]]:
    """(the systems counted now, the rows `system_counts` keeps) for the account."""
    async with engine.connect() as connection:
        counted = {
            tuple(row) for row in await connection.execute(text(_COUNTED), {"a": account_id})
        }
        kept = {tuple(row) for row in await connection.execute(text(_KEPT), {"a": account_id})}
    return counted, kept


async def _assert_totals(app: FastAPI, tenant: Tenant) -> None:
    """The kept rows are the systems' own count (no row at 0), and every filter of
    `GET /systems` on either environment says the total of the systems it lists."""
    async with client_for(app, tenant.test) as client:  # the sandbox's provisioned systems
        assert (await client.get("/api/v1/systems")).status_code == 200
    counted, kept = await _counts(app.state.engine, tenant.account_id)
    assert kept == counted
    for environment, key in (("live", tenant.live), ("test", tenant.test)):
        mine = [row for row in counted if row[1] == environment]
        async with client_for(app, key) as client:
            for status, zone in itertools.product((None, "active", "inactive"), (None, "NL", "BE")):
                params = {"limit": 1} | ({"status": status} if status else {})
                params |= {"market_zone": zone} if zone else {}
                listed = (await client.get("/api/v1/systems", params=params)).json()
                expected = sum(
                    row[4]
                    for row in mine
                    if (status is None or row[2] == status) and (zone is None or row[3] == zone)
                )
                assert listed["pagination"]["total"] == expected, (environment, status, zone)
                # Past the end the total is read alone (no page row carries it).
                past = {**params, "page": expected + 2}
                beyond = (await client.get("/api/v1/systems", params=past)).json()
                assert (beyond["data"], beyond["pagination"]["total"]) == ([], expected)


async def test_totals_follow_every_write(app: FastAPI) -> None:
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        made = [
            await create_system(client, name=f"s{i}", status=status, market_zone=zone)
            for i, (status, zone) in enumerate(
                [("active", "NL"), ("active", "NL"), ("inactive", "NL"), ("active", "BE"),
                 ("active", None), ("inactive", None)]
            )
        ]  # fmt: skip
        await _assert_totals(app, tenant)
        ids = [item["id"] for item in made]
        for patch in (
            {"status": "inactive"},  # NL: active -> inactive
            {"market_zone": "BE"},  # inactive: NL -> BE
            {"market_zone": None},  # BE -> none
            {"name": "renamed"},  # no move
            {"status": "inactive"},  # already so: no move
        ):
            response = await client.patch(f"/api/v1/systems/{ids[0]}", json=patch)
            assert response.status_code == 200, response.text
            await _assert_totals(app, tenant)
        assert (await client.delete(f"/api/v1/systems/{ids[3]}")).status_code == 204
        await _assert_totals(app, tenant)  # BE's last active system: its row is gone
    counted, _ = await _counts(app.state.engine, tenant.account_id)
    assert ("live", "active", "BE") not in {row[1:4] for row in counted}

    run_cli(settings_env(app.state.settings), "accounts", "delete", tenant.email, "--yes")
    assert await _counts(app.state.engine, tenant.account_id) == (set(), set())


async def test_concurrent_moves_both_ways_keep_the_count(app: FastAPI) -> None:
    """Moves between the same two keys in opposite directions, many at once: none fails
    and the totals end right (on PostgreSQL each waits for the other's row lock). The key
    order that rules out a deadlock between two moves is shown apart (its window lies inside
    one trigger's run, which this does not hit): `test_a_move_takes_its_two_count_rows_in_key_order`."""
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        actives = [(await create_system(client, name=f"a{i}"))["id"] for i in range(8)]
        inactives = [
            (await create_system(client, name=f"i{i}", status="inactive"))["id"] for i in range(8)
        ]

    async def flip(ids: list[str], first: str, second: str) -> None:
        async with client_for(app, tenant.live) as client:
            for status in (first, second, first, second):
                for system_id in ids:
                    patch = {"status": status}
                    response = await client.patch(f"/api/v1/systems/{system_id}", json=patch)
                    assert response.status_code == 200, response.text

    await asyncio.gather(
        flip(actives, "inactive", "active"),
        flip(inactives, "active", "inactive"),
        flip(actives[4:], "inactive", "active"),
    )
    await _assert_totals(app, tenant)
    counted, _ = await _counts(app.state.engine, tenant.account_id)
    assert {row[2]: row[4] for row in counted if row[1] == "live"} == {"active": 8, "inactive": 8}


@pytest.fixture(scope="module")
async def pg_app(postgres_settings: Settings) -> AsyncIterator[FastAPI]:
    async with running_app(postgres_settings) as application:
        yield application


_ROW = (
    "SELECT systems FROM system_counts WHERE account_id = :a AND environment = 'live'"
    " AND status = :s AND market_zone = 'NL' FOR UPDATE"
)


async def _waiting_for_a_lock(watcher: AsyncConnection, pid: int) -> None:
    """Until the backend `pid` waits for a lock (polled, at most 60 s)."""
    query = text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid")
    for _ in range(6000):
        if await watcher.scalar(query, {"pid": pid}) == "Lock":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


async def test_a_move_takes_its_two_count_rows_in_key_order(pg_app: FastAPI) -> None:
    """A move from a key that sorts last to one that sorts first ('inactive' -> 'active')
    takes the first key's row before the other's: held up on the first, it holds nothing,
    so a transaction taking the rows the other way round cannot be waiting on it (the
    deadlock two opposite moves would otherwise make). Shown with the rows locked by hand:
    while the move waits for 'active', 'inactive' is still free to lock."""
    tenant = await make_tenant(pg_app, Plan.ENTERPRISE)
    async with client_for(pg_app, tenant.live) as client:
        await create_system(client, name="on")
        moved = (await create_system(client, name="off", status="inactive"))["id"]
    engine: AsyncEngine = pg_app.state.engine
    account = {"a": tenant.account_id}
    async with (
        engine.connect() as holder,
        engine.connect() as mover,
        engine.connect() as prober,
        engine.connect() as watcher,
    ):
        await holder.execute(text(_ROW), {**account, "s": "active"})  # 'active' held
        pid = int(await mover.scalar(text("SELECT pg_backend_pid()")))
        move = asyncio.ensure_future(
            mover.execute(
                text("UPDATE systems SET status = 'active' WHERE id = :id"), {"id": moved}
            )
        )
        try:
            await _waiting_for_a_lock(watcher, pid)
            try:
                free = await prober.scalar(text(_ROW + " NOWAIT"), {**account, "s": "inactive"})
            except DBAPIError as exc:  # locked by the waiting move: the wrong order
                free = repr(exc.orig)
            await prober.rollback()
        finally:
            await holder.rollback()  # the move goes on
            await move
            await mover.commit()
    assert free == 1, f"the move held 'inactive' while it waited for 'active': {free}"
    await _assert_totals(pg_app, tenant)
    counted, _ = await _counts(engine, tenant.account_id)
    assert {row[2]: row[4] for row in counted if row[1] == "live"} == {"active": 2}


@pytest.mark.parametrize("database", DATABASES)
async def test_the_migration_counts_the_systems_already_there(
    database: str, tmp_path: Path
) -> None:
    async with blank_settings(database, tmp_path) as settings:
        await asyncio.to_thread(upgrade, settings)
        env = settings_env(settings)
        run_cli(env, "accounts", "create", "--email", "a@example.com", "--name", "A",
                "--password", "correct horse battery", "--plan", "pro")  # fmt: skip
        for name, zone in (("one", "NL"), ("two", "NL"), ("three", "BE")):
            run_cli(env, "systems", "create", "--account", "a@example.com", "--name", name,
                    "--capacity-kwp", "5", "--latitude", "52", "--longitude", "5",
                    "--timezone", "Europe/Amsterdam", "--market-zone", zone)  # fmt: skip
        engine = create_oneshot_engine(settings)
        try:
            async with engine.connect() as connection:
                account_id = await connection.scalar(text("SELECT id FROM accounts"))
            before = await _counts(engine, account_id)
            assert (
                before[0]
                == before[1]
                == {
                    (account_id, "live", "active", "NL", 2),
                    (account_id, "live", "active", "BE", 1),
                }
            )
            await asyncio.to_thread(downgrade, settings, "0025_reading_chunks")
            await asyncio.to_thread(upgrade, settings)
            assert await _counts(engine, account_id) == before
        finally:
            await engine.dispose()
