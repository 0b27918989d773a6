"""The Python client against a real `solarapi serve`, on SQLite and on PostgreSQL.

The server has a database of its own (a fresh SQLite data dir, a fresh PostgreSQL database) and
runs its jobs inline, so reports complete and webhooks are delivered as in production, without
taking other tests' jobs. When a test fails, the part of the server's log written during it is
printed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from solarapi_client import Client
from tests.conftest import TEST_SECRET, _admin
from tests.support import (
    POSTGRES_ADMIN_URL,
    Tenant,
    TestClock,
    free_port,
    make_tenant,
    need_service,
    postgres_available,
    settings_env,
)
from tests.support import served as served_process


@dataclass(frozen=True)
class Served:
    base_url: str
    log: Path
    settings: Settings


def server_env(settings: Settings) -> dict[str, str]:
    return settings_env(
        settings,
        SOLARAPI_JOB_RUNNER="inline",
        SOLARAPI_WEBHOOKS_ALLOW_LOOPBACK="true",
        SOLARAPI_REDIS_URL="",
        SOLARAPI_LOG_LEVEL="INFO",
        # The server lives for the whole run beside every other test's databases: it keeps
        # few idle connections, so the suite stays under PostgreSQL's max_connections.
        SOLARAPI_DB_POOL_SIZE="2",
    )


def unreachable_database_env(data_dir: Path) -> dict[str, str]:
    """A server's environment whose database never answers (a port nothing listens on): its
    requests get 503 `unavailable` with `Retry-After`."""
    return {
        "SOLARAPI_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/nothing",
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_SECRET_KEY": TEST_SECRET,
        "SOLARAPI_JOB_RUNNER": "external",
        "SOLARAPI_REDIS_URL": "",
    }


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def client_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    data_dir = tmp_path_factory.mktemp(f"client-{request.param}")
    if request.param == "sqlite":
        settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET, job_runner="external")
        upgrade(settings)
        yield settings
        return
    need_service("PostgreSQL", postgres_available())
    name = f"solarapi_client_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    settings = Settings(
        data_dir=data_dir, database_url=url, secret_key=TEST_SECRET, job_runner="external"
    )
    try:
        upgrade(settings)
        yield settings
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
async def tenant_app(client_settings: Settings) -> AsyncIterator[FastAPI]:
    """An in-process app on the server's database, only to make accounts and keys."""
    few_connections = client_settings.model_copy(update={"db_pool_size": 2})
    application = create_app(few_connections, clock=TestClock(), run_jobs=False)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
def served(client_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("client-server-log") / "serve.log"
    with served_process(server_env(client_settings), log=log) as server:
        yield Served(server.base, log, client_settings)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _server_log_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    if "served" not in request.fixturenames:
        yield
        return
    served: Served = request.getfixturevalue("served")
    start = served.log.stat().st_size
    yield
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        with served.log.open("rb") as log:
            log.seek(start)
            print("--- solarapi serve's log during this test ---")
            print(log.read().decode(errors="replace"))


@pytest.fixture
async def enterprise(tenant_app: FastAPI) -> Tenant:
    return await make_tenant(tenant_app, Plan.ENTERPRISE)


@pytest.fixture
async def pro(tenant_app: FastAPI) -> Tenant:
    return await make_tenant(tenant_app, Plan.PRO)


@pytest.fixture
def client(served: Served, enterprise: Tenant) -> Iterator[Client]:
    with Client(api_key=enterprise.live, base_url=served.base_url) as api:
        yield api


@pytest.fixture
def sandbox(served: Served, enterprise: Tenant) -> Iterator[Client]:
    with Client(api_key=enterprise.test, base_url=served.base_url) as api:
        yield api
