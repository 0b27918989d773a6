"""A database that answers but cannot be used is an outage: every API request answers 503
`unavailable` with Retry-After, /health says so too, and service resumes without a restart
once the database is back. Against real databases that the tests break on purpose."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from solarapi.auth.keys import checksum
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, is_outage, schema_revision
from solarapi.dbfaults import SCHEMA_REVISION
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.support import (
    POSTGRES_ADMIN_URL,
    TEST_SECRET,
    Tenant,
    admin,
    admin_connection,
    client_for,
    database_url,
    free_port,
    make_tenant,
    need_service,
    postgres_available,
    running_app,
    scratch_database,
)
from tests.systems.factories import system_body

pytestmark = [pytest.mark.services]


async def _answers(client: httpx.AsyncClient) -> list[httpx.Response]:
    """One request of each kind: authenticated read and write (with an Idempotency-Key),
    and the health check."""
    return [
        await client.get("/api/v1/account"),
        await client.get("/api/v1/systems"),
        await client.post(
            "/api/v1/systems",
            json=system_body(),
            headers={"Idempotency-Key": f"fault-{uuid.uuid4()}"},
        ),
        await client.get("/api/v1/health"),
    ]


async def _assert_outage(client: httpx.AsyncClient, state: str) -> None:
    for response in await _answers(client):
        where = f"{state}: {response.request.method} {response.request.url.path}"
        assert response.status_code == 503, (where, response.text)
        assert response.headers["retry-after"].isdigit(), where
        body = response.json()
        if response.request.url.path.endswith("/health"):
            assert body["status"] == "unavailable", where
            assert body["checks"]["database"] == "unavailable", where
        else:
            assert body["code"] == "unavailable", where
            assert set(body) == {"error", "code"}, where


async def _assert_serving(client: httpx.AsyncClient, state: str) -> None:
    account, systems, created, health = await _answers(client)
    assert account.status_code == 200, (state, account.text)
    assert systems.status_code == 200, (state, systems.text)
    assert created.status_code == 201, (state, created.text)
    assert health.status_code == 200, (state, health.text)
    assert health.json()["checks"]["database"] == "ok", state


async def _disconnect_all(name: str) -> None:
    """End every session on database `name` (our app's pooled connections included)."""
    conn = await admin_connection()
    try:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
    finally:
        await conn.close()


async def _until(sql: str) -> None:
    """Run an admin statement that needs the database's sessions gone (RENAME, DROP): a
    terminated backend takes a moment to exit, so retry with a deadline."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            await admin(sql)
            return
        except Exception as exc:  # "is being accessed by other users"
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{sql}: {exc}") from exc
            await asyncio.sleep(0.05)


@asynccontextmanager
async def _role() -> AsyncIterator[str]:
    """A login role that is not a superuser: connection limits apply to it."""
    role = f"solarapi_fault_{uuid.uuid4().hex[:8]}"
    await admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield role
    finally:
        await admin(f'DROP ROLE IF EXISTS "{role}"')


def _well_formed_key() -> str:
    random_part = "a" * 32
    return f"pk_live_{random_part}{checksum(random_part)}"


def _url(name: str, role: str) -> str:
    return (
        make_url(POSTGRES_ADMIN_URL)
        .set(database=name, username=role)
        .render_as_string(hide_password=False)
    )


@asynccontextmanager
async def _served(settings: Settings) -> AsyncIterator[tuple[FastAPI, Tenant]]:
    async with running_app(settings) as app:
        yield app, await make_tenant(app, Plan.ENTERPRISE)


async def test_postgres_unusable_states_are_503_and_recover_without_restart(
    tmp_path: Path,
) -> None:
    need_service("PostgreSQL", postgres_available())
    async with _role() as role, scratch_database() as name:
        await admin(f'ALTER DATABASE "{name}" OWNER TO "{role}"')
        await admin(f'GRANT ALL ON SCHEMA public TO "{role}"', name)
        await admin(f'ALTER SCHEMA public OWNER TO "{role}"', name)
        settings = Settings(
            database_url=_url(name, role),
            secret_key=TEST_SECRET,
            data_dir=tmp_path,
            job_runner="external",
        )
        await asyncio.to_thread(upgrade, settings)
        async with _served(settings) as (app, tenant), client_for(app, tenant.live) as client:
            await _assert_serving(client, "migrated")

            # Renamed away under the app (as good as dropped: the name no longer exists).
            await _disconnect_all(name)
            await _until(f'ALTER DATABASE "{name}" RENAME TO "{name}_moved"')
            await _assert_outage(client, "renamed")
            await _until(f'ALTER DATABASE "{name}_moved" RENAME TO "{name}"')
            await _assert_serving(client, "renamed back")

            # Not accepting connections.
            await admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            await _disconnect_all(name)
            await _assert_outage(client, "not accepting connections")
            await admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            await _assert_serving(client, "accepting again")

            # Out of connection slots ("too many connections for role").
            await admin(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
            await _disconnect_all(name)
            await _assert_outage(client, "too many clients")
            await admin(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
            await _assert_serving(client, "slots free again")

            # Dropped, then created again empty: still an outage until it is migrated.
            await _disconnect_all(name)
            await _until(f'DROP DATABASE "{name}" WITH (FORCE)')
            await _assert_outage(client, "dropped")
            await admin(f'CREATE DATABASE "{name}" OWNER "{role}"')
            await admin(f'ALTER SCHEMA public OWNER TO "{role}"', name)
            await _assert_outage(client, "empty database")
            await asyncio.to_thread(upgrade, settings, "0001_foundation")
            # Partly migrated: /health says so (the key is gone, so the API answers 401).
            health = await client.get("/api/v1/health")
            assert health.status_code == 503
            assert health.json()["checks"]["database"] == "unavailable"
            await asyncio.to_thread(upgrade, settings)
            # Migrated and empty: the old key is gone with the old database, a new one works.
            fresh = await make_tenant(app, Plan.ENTERPRISE)
            async with client_for(app, fresh.live) as again:
                await _assert_serving(again, "migrated again")


async def test_an_unmigrated_sqlite_database_is_unavailable_until_migrated(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, job_runner="external")
    async with running_app(settings) as app, client_for(app) as anonymous:
        health = await anonymous.get("/api/v1/health")
        assert health.status_code == 503, health.text
        assert health.json()["checks"]["database"] == "unavailable"
        keyed = await anonymous.get(
            "/api/v1/account",
            headers={"Authorization": f"Bearer {_well_formed_key()}"},
        )
        assert keyed.status_code == 503, keyed.text
        assert keyed.json()["code"] == "unavailable"
        assert keyed.headers["retry-after"].isdigit()
        await asyncio.to_thread(upgrade, settings)
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            await _assert_serving(client, "migrated")


async def test_a_real_bug_in_sql_stays_a_500_on_a_current_schema(app: FastAPI) -> None:
    """A missing table is confirmed against the schema's revision: on a current schema it is
    a bug of ours (500), not an outage (503), so it is not hidden behind retries."""
    assert await schema_revision(app.state.engine) == SCHEMA_REVISION
    async with app.state.engine.connect() as connection:
        with pytest.raises(DBAPIError) as failed:
            await connection.execute(text("SELECT * FROM no_such_table"))
    assert not await is_outage(failed.value, app.state.engine)


_PG_BIN = Path("/usr/lib/postgresql/15/bin")


@contextmanager
def _private_postgres() -> Iterator[tuple[int, Callable[..., None]]]:
    """A PostgreSQL server of this test's own (the shared one must stay up for everyone), run
    as the `postgres` user; yields its port and a `pg_ctl` runner."""
    runuser = shutil.which("runuser")
    if runuser is None or not (_PG_BIN / "initdb").exists():
        need_service("a private PostgreSQL server (runuser, initdb)", False)
    home = Path(tempfile.mkdtemp(prefix="solarapi-pg-"))
    shutil.chown(home, "postgres")
    port = free_port()

    def pg_ctl(*args: str) -> None:
        subprocess.run(
            [str(runuser), "-u", "postgres", "--", str(_PG_BIN / "pg_ctl"), "-D",
             str(home / "data"), "-l", str(home / "log"), *args],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    subprocess.run(
        [str(runuser), "-u", "postgres", "--", str(_PG_BIN / "initdb"), "-D", str(home / "data"),
         "-A", "trust", "-U", "postgres"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    # The server's options ride in its data directory, so a plain `pg_ctl start` reuses them.
    (home / "data" / "postgresql.auto.conf").write_text(
        f"port = {port}\nunix_socket_directories = '{home}'\nlisten_addresses = '127.0.0.1'\n"
    )
    try:
        pg_ctl("-w", "start")
        yield port, pg_ctl
    except BaseException:
        print((home / "log").read_text(errors="replace"), file=sys.stderr)
        raise
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(home, ignore_errors=True)


async def test_a_postgres_server_shutting_down_is_503_and_recovery_needs_no_restart(
    tmp_path: Path,
) -> None:
    with _private_postgres() as (port, pg_ctl):
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        settings = Settings(
            database_url=url, secret_key=TEST_SECRET, data_dir=tmp_path, job_runner="external"
        )
        await asyncio.to_thread(upgrade, settings)
        async with _served(settings) as (app, tenant), client_for(app, tenant.live) as client:
            await _assert_serving(client, "running")
            # A session of our own keeps a "smart" shutdown pending: the server refuses new
            # connections ("the database system is shutting down", 57P03) until it ends.
            held = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres")
            await held.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            await asyncio.to_thread(pg_ctl, "-m", "smart", "-W", "stop")
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                try:
                    probe = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres")
                except asyncpg.CannotConnectNowError:
                    break
                await probe.close()
                assert asyncio.get_running_loop().time() < deadline, "never began shutting down"
                await asyncio.sleep(0.05)
            await _assert_outage(client, "shutting down")
            await held.close()  # the server finishes stopping
            await asyncio.to_thread(pg_ctl, "-w", "stop")
            await _assert_outage(client, "stopped")
            await asyncio.to_thread(pg_ctl, "-w", "start")
            await _assert_serving(client, "started again")


@asynccontextmanager
async def _current_schema(kind: str, tmp_path: Path) -> AsyncIterator[Settings]:
    if kind == "sqlite":
        settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, job_runner="external")
        await asyncio.to_thread(upgrade, settings)
        yield settings
        return
    need_service("PostgreSQL", postgres_available())
    async with scratch_database() as name:
        settings = Settings(
            data_dir=tmp_path,
            database_url=database_url(name),
            secret_key=TEST_SECRET,
            job_runner="external",
        )
        await asyncio.to_thread(upgrade, settings)
        yield settings


async def _behind_with_not_null(settings: Settings, revision: str) -> None:
    """The schema as a revision before 0008 left it for declarations (energies NOT NULL),
    recorded as `revision`: what a release one migration ahead meets."""

    def alter(connection: Any) -> None:
        operations = Operations(MigrationContext.configure(connection))
        with operations.batch_alter_table("declarations") as batch:
            for column in ("energy_wh", "metered_energy_wh"):
                batch.alter_column(column, existing_type=sa.Float(), nullable=False)
        connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})

    engine = create_oneshot_engine(settings)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(alter)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_not_null_column_of_a_schema_one_revision_behind_is_503(
    kind: str, tmp_path: Path
) -> None:
    from tests.declarations.factories import create_declaration, make_system

    async with (
        _current_schema(kind, tmp_path) as settings,
        _served(settings) as (app, tenant),
        client_for(app, tenant.live) as client,
    ):
        system = await make_system(client)
        await _behind_with_not_null(settings, "0007_dashboard")
        # No readings: the current code stores null energies, which the older schema refuses.
        draft = await create_declaration(client, system["id"])
        assert draft.status_code == 503, draft.text
        assert draft.json()["code"] == "unavailable"
        assert draft.headers["retry-after"].isdigit()
