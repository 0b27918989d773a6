"""Apps on a migrated SQLite database and, when present, a fresh PostgreSQL database.

Every test that takes `app` runs once per backend. Tests are isolated by tenancy: each
creates its own accounts and keys (and so its own rate-limit windows), from its own client IP.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from argon2 import profiles
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings
from sqlalchemy.engine import make_url

from solarapi.accounts import passwords
from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.support import (
    DATABASES,
    POSTGRES_ADMIN_URL,
    Tenant,
    TestClock,
    make_tenant,
    need_service,
    postgres_available,
    server_logs,
)

TEST_SECRET = "test-secret-key-that-is-long-enough-0123456789"

# Argon2 at its production cost is ~0.1–0.25 s of CPU per hash, and most of the ~1,300 tests
# make an account (one hash) first. In the test process, new hashes use argon2-cffi's CHEAPEST
# profile, which it provides for tests; verifying reads the parameters from the hash itself,
# so every code path is the one that runs in production. Servers the tests start as processes
# hash at full cost, and tests/dashboard/test_accounts.py holds the production profile.
passwords.use_profile(profiles.CHEAPEST)

# CI (and `make test`/`make quick`, which set HYPOTHESIS_PROFILE=ci) run the same examples
# every time: a good commit is green whatever the seed, and a failure reproduces. A plain
# `pytest` explores new random examples; what it finds is kept as an explicit @example.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
)


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
    if "postgres" not in DATABASES:
        pytest.skip("SOLARAPI_TEST_DATABASES leaves PostgreSQL out")
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


@pytest.fixture(scope="session", params=DATABASES)
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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    server_logs.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test that ran servers shows their logs (kept by `keep_log`)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed:
        for label, text in server_logs:
            report.sections.append((f"log of {label}", text or "(empty)"))
