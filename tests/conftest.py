"""Apps on a migrated SQLite database and, when present, a fresh PostgreSQL database.

Every test that takes `app` runs once per backend. Tests are isolated by tenancy: each
creates its own accounts and keys (and so its own rate-limit windows), from its own client IP.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.support import (
    POSTGRES_ADMIN_URL,
    Tenant,
    TestClock,
    make_tenant,
    need_service,
    postgres_available,
)

TEST_SECRET = "test-secret-key-that-is-long-enough-0123456789"


async def _admin(sql: str) -> None:
    import asyncpg

    url = make_url(POSTGRES_ADMIN_URL)
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def sqlite_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    data_dir = tmp_path_factory.mktemp("sqlite-data")
    settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET, job_runner="external")
    upgrade(settings)
    return settings


@pytest.fixture(scope="session")
def postgres_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    need_service("PostgreSQL", postgres_available())
    name = f"solarapi_test_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_ADMIN_URL).set(database=name)
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("pg-data"),
        database_url=url.render_as_string(hide_password=False),
        secret_key=TEST_SECRET,
        job_runner="external",
    )
    upgrade(settings)
    yield settings
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest) -> Settings:
    return request.getfixturevalue(f"{request.param}_settings")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def clock() -> TestClock:
    return TestClock()


@pytest.fixture(autouse=True)
def _unpin_clock(clock: TestClock) -> Iterator[None]:
    yield
    clock.pinned = None


@pytest.fixture(scope="session")
async def app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    application = create_app(settings, clock=clock, run_jobs=False)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def enterprise(app: FastAPI) -> Tenant:
    return await make_tenant(app, Plan.ENTERPRISE)


@pytest.fixture
async def pro(app: FastAPI) -> Tenant:
    return await make_tenant(app, Plan.PRO)


@pytest.fixture
async def starter(app: FastAPI) -> Tenant:
    return await make_tenant(app, Plan.STARTER)


@pytest.fixture
def data_dir(settings: Settings) -> Path:
    return settings.data_dir
