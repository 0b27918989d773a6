"""Support for fault tests: a scratch PostgreSQL database of a test's own (to drop, rename or
break without touching anyone else's), and the environment of a real `solarapi serve` on it
(started with `tests.support.served`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url

from solarapi.config import Settings
from tests.support import POSTGRES_ADMIN_URL, settings_env


async def admin_connection(database: str | None = None) -> asyncpg.Connection:
    """A connection to the admin database, or to `database` on the same server."""
    url = make_url(POSTGRES_ADMIN_URL)
    return await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=database or url.database
    )


async def admin(sql: str, database: str | None = None) -> None:
    conn = await admin_connection(database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def database_url(name: str) -> str:
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (unmigrated); yields its name. Dropped afterwards
    under either of the names a test may have given it."""
    name = f"solarapi_fault_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        for candidate in (name, f"{name}_moved"):
            await admin(f'DROP DATABASE IF EXISTS "{candidate}" WITH (FORCE)')


def server_env(settings: Settings, **extra: str) -> dict[str, str]:
    """`settings_env` for a `solarapi serve` of a fault test: jobs left to no one, limits in
    the process, plus `extra`."""
    defaults = {"SOLARAPI_JOB_RUNNER": "external", "SOLARAPI_REDIS_URL": ""}
    return settings_env(settings, **{**defaults, **extra})
