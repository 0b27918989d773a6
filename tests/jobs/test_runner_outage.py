"""A real `solarapi worker` while its database is unusable: one error record, not a traceback
a second (~1.3 GB of log a day), polls further and further apart, and one record when it
works again. On PostgreSQL the database does not exist yet; on SQLite it is not migrated."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest

from solarapi.config import Settings
from solarapi.migrate import upgrade
from tests.jobs.test_workers import worker
from tests.support import (
    DATABASES,
    TEST_SECRET,
    admin,
    database_url,
    need_service,
    new_database_name,
    postgres_available,
)

pytestmark = pytest.mark.slow

DEADLINE_S = 90
FAILED_POLLS = 5


@asynccontextmanager
async def unusable(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Settings, Callable[[], None]]]:
    """Settings of a database the worker cannot use, and how to make it usable."""
    if kind == "sqlite":
        settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
        yield settings, lambda: upgrade(settings)
        return
    need_service("PostgreSQL", postgres_available())
    name = new_database_name("outage")
    settings = Settings(data_dir=tmp_path, database_url=database_url(name), secret_key=TEST_SECRET)

    def create() -> None:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
        upgrade(settings)

    try:
        yield settings, create
    finally:
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _records(settings: Settings) -> list[dict[str, object]]:
    text = (settings.data_dir / "worker-stderr.log").read_text(errors="replace")
    return [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]


def _runner_records(settings: Settings, level: str) -> list[str]:
    return [
        str(r["msg"])
        for r in _records(settings)
        if r.get("logger") == "solarapi.jobs" and r.get("level") == level
    ]


async def _until(condition: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, failure
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", DATABASES)
async def test_the_runner_logs_once_and_backs_off_while_the_database_is_unusable(
    kind: str, tmp_path: Path
) -> None:
    async with unusable(kind, tmp_path) as (settings, make_usable):
        with worker(settings, env={"SOLARAPI_LOG_LEVEL": "DEBUG"}) as proc:

            def failed_polls() -> list[str]:
                return [m for m in _runner_records(settings, "debug") if "failed" in m]

            await _until(
                lambda: len(failed_polls()) >= FAILED_POLLS or proc.poll() is not None,
                "the runner never polled the unusable database",
            )
            assert proc.poll() is None, "the worker exited"
            errors = _runner_records(settings, "error")
            assert len(errors) == 1, errors
            assert "the database is unusable" in errors[0]
            assert not any(
                r.get("exc") for r in _records(settings) if r.get("logger") == "solarapi.jobs"
            ), "a traceback was logged for an outage"
            waits = [float(m) for m in re.findall(r"next in ([\d.]+) s", "\n".join(failed_polls()))]
            assert waits[:FAILED_POLLS] == sorted(waits[:FAILED_POLLS]), waits
            assert waits[FAILED_POLLS - 1] > waits[0], waits

            await asyncio.to_thread(make_usable)
            await _until(
                lambda: any("polls work again" in m for m in _runner_records(settings, "warning")),
                "the runner never noticed the database was back",
            )
        assert len(_runner_records(settings, "error")) == 1
