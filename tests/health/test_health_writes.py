"""SQLite on a disk that refuses writes: writes were 503 while `/health` said ok. A real
`solarapi serve` whose file-size limit is lowered under it (`prlimit`): writing any file
then fails as on a full disk, and `/health` must say so — and recover when writes work."""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.support import TEST_SECRET, Server, make_tenant, running_app, served, settings_env
from tests.systems.factories import system_body

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="prlimit on another process is Linux's"
)
DEADLINE_S = 60


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, job_runner="external")
    upgrade(settings)

    async def key() -> str:
        async with running_app(settings) as app:
            return (await make_tenant(app, Plan.ENTERPRISE)).live

    live = asyncio.run(key())
    with served(settings_env(settings)) as started:
        yield started, live


def _health(base: str) -> httpx.Response:
    return httpx.get(f"{base}/api/v1/health", timeout=30)


def _until_health(base: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + DEADLINE_S
    while (response := _health(base)).status_code != status:
        assert time.monotonic() < deadline, response.text
    return response


def test_health_is_unavailable_while_writes_fail_and_recovers(
    server: tuple[Server, str],
) -> None:
    started, key = server
    headers = {"Authorization": f"Bearer {key}"}
    assert _health(started.base).status_code == 200
    pid = started.process.pid
    limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    # No file of the process may grow past 1 kB: every write to the database's WAL fails
    # (EFBIG, as ENOSPC on a full disk).
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (1024, limits[1]))
    try:
        created = httpx.post(
            f"{started.base}/api/v1/systems", json=system_body(), headers=headers, timeout=30
        )
        assert created.status_code == 503, created.text
        assert created.json()["code"] == "unavailable"
        body = _until_health(started.base, 503).json()
        assert body["status"] == "unavailable"
        assert body["checks"]["database"] == "unavailable"
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)
    assert _until_health(started.base, 200).json()["checks"]["database"] == "ok"
    again = httpx.post(
        f"{started.base}/api/v1/systems", json=system_body(), headers=headers, timeout=30
    )
    assert again.status_code == 201, again.text
