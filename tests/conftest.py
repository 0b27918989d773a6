"""Apps on a migrated SQLite database and, when present, a fresh PostgreSQL database.

Every test that takes `app` runs once per backend. Tests are isolated by tenancy: each
creates its own accounts and keys (and so its own rate-limit windows), from its own client IP.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from argon2 import profiles
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings

import solarapi.webhooks.jobs  # noqa: F401 - registers the delivery job handler
from solarapi.accounts import passwords
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from tests.support import (
    DATABASES,
    PROBE_BODY_LIMIT,
    TEST_SECRET,
    LogCapture,
    Tenant,
    TestClock,
    add_probe_routes,
    blank_settings,
    drop_stale_databases,
    log_marks,
    logs_since,
    make_tenant,
    migrated_settings,
    postgres_available,
    running_app,
    server_logs,
    settings_like,
)

__all__ = ["TEST_SECRET"]  # where tests imported it from before tests/support.py held it

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


@pytest.fixture(scope="session")
def sqlite_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with migrated_settings("sqlite", tmp_path_factory.mktemp("sqlite-data")) as settings:
        yield settings


@pytest.fixture(scope="session")
def postgres_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    if "postgres" not in DATABASES:
        pytest.skip("SOLARAPI_TEST_DATABASES leaves PostgreSQL out")
    with migrated_settings("postgres", tmp_path_factory.mktemp("pg-data")) as settings:
        yield settings


@pytest.fixture(scope="session", params=DATABASES)
def settings(request: pytest.FixtureRequest) -> Settings:
    return request.getfixturevalue(f"{request.param}_settings")  # type: ignore[no-any-return]


@pytest.fixture(params=DATABASES)
async def blank_database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    """An empty, unmigrated database of a test's own, once per backend (migration tests)."""
    async with blank_settings(request.param, tmp_path) as settings:
        yield settings


@pytest.fixture(scope="session")
def clock() -> TestClock:
    return TestClock()


@pytest.fixture(autouse=True)
def _unpin_clock(clock: TestClock) -> Iterator[None]:
    yield
    clock.pinned = None


@pytest.fixture(scope="session")
async def app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    async with running_app(settings, clock) as application:
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


@pytest.fixture(scope="session")
async def loopback_app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    """The app of an operator who allows loopback webhook receivers (the delivery tests'
    receiver runs on 127.0.0.1), on the same databases as `app`."""
    loopback = settings.model_copy(update={"webhooks_allow_loopback": True})
    async with running_app(loopback, clock) as application:
        yield application


@pytest.fixture
async def loopback_tenant(loopback_app: FastAPI) -> Tenant:
    return await make_tenant(loopback_app, Plan.ENTERPRISE)


@pytest.fixture
def data_dir(settings: Settings) -> Path:
    return settings.data_dir


@pytest.fixture(scope="session")
async def probe_app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    """The product app plus test-only probe routes (`add_probe_routes`), on the same database
    as `app`, with a small body limit."""
    probed = settings_like(settings, max_body_bytes=PROBE_BODY_LIMIT)
    async with running_app(probed, clock, routes=add_probe_routes) as application:
        yield application


@pytest.fixture
def log_lines() -> Iterator[LogCapture]:
    """Every log line the service writes during the test, formatted as in production."""
    handler = LogCapture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Drop the PostgreSQL databases an earlier, killed test run left (`drop_stale_databases`)."""
    if postgres_available():
        asyncio.run(drop_stale_databases())


_LOG_MARKS = pytest.StashKey[dict[str, int]]()
_FAILED = pytest.StashKey[bool]()
_SHOWN = pytest.StashKey[set[str]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    server_logs.clear()
    item.stash[_LOG_MARKS] = log_marks()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """The one log-on-failure hook: a failing test shows the logs of the processes it ran
    (`served`, `started_worker`, anything kept by `keep_log`) and what a server that outlives
    it (a session's) wrote during it. A test that failed shows, at teardown, the logs of
    processes its fixtures stopped."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    failed = report.failed or item.stash.get(_FAILED, False)
    item.stash[_FAILED] = failed
    if not failed:
        return
    shown = item.stash.setdefault(_SHOWN, set())
    for label, text in logs_since(item.stash.get(_LOG_MARKS, {})):
        if label not in shown:
            shown.add(label)
            report.sections.append((f"log of {label}", text or "(empty)"))
