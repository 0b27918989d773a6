"""The Python client against a real `solarapi serve`, on SQLite and on PostgreSQL.

The server has a database of its own (a fresh SQLite data dir, a fresh PostgreSQL database) and
runs its jobs inline, so reports complete and webhooks are delivered as in production, without
taking other tests' jobs. When a test fails, the part of the server's log written during it is
shown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi_client import Client
from tests.support import (
    TEST_SECRET,
    Tenant,
    free_port,
    make_tenant,
    migrated_settings,
    running_app,
    settings_env,
)
from tests.support import served as served_process


@dataclass(frozen=True)
class Served:
    base_url: str
    log: Path
    settings: Settings


def server_env(settings: Settings) -> dict[str, str]:
    """The client tests' server: jobs inline (reports complete, webhooks are delivered to
    loopback receivers), as in production."""
    return settings_env(
        settings,
        SOLARAPI_JOB_RUNNER="inline",
        SOLARAPI_WEBHOOKS_ALLOW_LOOPBACK="true",
        SOLARAPI_LOG_LEVEL="INFO",
        # The server lives for the whole run beside every other test's databases: it keeps
        # few idle connections, so the suite stays under PostgreSQL's max_connections.
        SOLARAPI_DB_POOL_SIZE="2",
    )


def unreachable_database_env(data_dir: Path) -> dict[str, str]:
    """A server's environment whose database never answers (a port nothing listens on): its
    requests get 503 `unavailable` with `Retry-After`."""
    unreachable = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    return settings_env(
        Settings(
            data_dir=data_dir,
            database_url=unreachable,
            secret_key=TEST_SECRET,
            job_runner="external",
        )
    )


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def client_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    data_dir = tmp_path_factory.mktemp(f"client-{request.param}")
    with migrated_settings(request.param, data_dir, prefix="client") as settings:
        yield settings


@pytest.fixture(scope="session")
async def tenant_app(client_settings: Settings) -> AsyncIterator[FastAPI]:
    """An in-process app on the server's database, only to make accounts and keys."""
    few_connections = client_settings.model_copy(update={"db_pool_size": 2})
    async with running_app(few_connections) as application:
        yield application


@pytest.fixture(scope="session")
def served(client_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The server (one a session per database). A failing test shows what it logged during
    the test (the log-on-failure hook in tests/conftest.py)."""
    log = tmp_path_factory.mktemp("client-server-log") / "serve.log"
    with served_process(server_env(client_settings), log=log) as server:
        yield Served(server.base, log, client_settings)


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
