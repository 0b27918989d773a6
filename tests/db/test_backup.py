"""The backup and restore procedure of docs/operations.md, run as written: PostgreSQL with
`pg_dump`/`pg_restore`, SQLite with `sqlite3 .backup`, into a fresh database. The restored
service answers the same numbers to the same key — with the same secret; with another
secret every key is refused (what losing `SOLARAPI_SECRET_KEY` means)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.reports.helpers import JUNE_1, make_system, upload_readings
from tests.support import (
    DATABASES,
    TEST_SECRET,
    admin,
    client_for,
    database_url,
    make_tenant,
    need_service,
    new_database_name,
    postgres_available,
    running_app,
)

pytestmark = pytest.mark.slow
OTHER_SECRET = "another-secret-that-is-long-enough-9876543210"


@pytest.fixture(params=DATABASES)
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty databases: the one in service and the one to restore into."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/solar.db", f"sqlite:///{tmp_path}/restored/solar.db"
        return
    need_service("PostgreSQL", postgres_available())
    names = [new_database_name("backup") for _ in range(2)]
    for name in names:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield tuple(database_url(name) for name in names)  # type: ignore[misc]
    finally:
        for name in names:
            asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _settings(url: str, data_dir: Path, secret: str = TEST_SECRET) -> Settings:
    return Settings(data_dir=data_dir, database_url=url, secret_key=secret, job_runner="external")


async def _numbers(settings: Settings, key: str, system_id: str) -> tuple[int, Any, Any]:
    async with running_app(settings) as app, client_for(app, key) as client:
        account = await client.get("/api/v1/account")
        if account.status_code != 200:
            return account.status_code, None, None
        readings = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z", "interval": "1h"},
        )
        return 200, account.json()["id"], readings.json()


def _backup_and_restore(source: str, target: str, work: Path) -> None:
    """docs/operations.md, "Backup and restore", as an operator types it."""
    if source.startswith("sqlite"):
        source_file, target_file = source.split("///", 1)[1], target.split("///", 1)[1]
        backup = work / "solar-backup.db"
        subprocess.run(["sqlite3", source_file, f".backup '{backup}'"], check=True)
        Path(target_file).parent.mkdir(parents=True)
        subprocess.run(["cp", str(backup), target_file], check=True)
        return
    dump = work / "solar.dump"
    subprocess.run(
        ["pg_dump", "--format=custom", f"--file={dump}", source], check=True, timeout=300
    )
    subprocess.run(
        ["pg_restore", "--no-owner", "--exit-on-error", f"--dbname={target}", str(dump)],
        check=True,
        timeout=300,
    )


async def test_a_restored_database_with_the_same_secret_answers_the_same(
    databases: tuple[str, str], tmp_path: Path
) -> None:
    source_url, target_url = databases
    source = _settings(source_url, tmp_path)
    await asyncio.to_thread(upgrade, source)
    async with running_app(source) as app:
        tenant = await make_tenant(app, Plan.PRO)
        enterprise = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, enterprise.live) as client:
            system = await make_system(client, "Roof", "Europe/Amsterdam", market_zone="NL")
            await upload_readings(client, system, JUNE_1, 96)
    before = await _numbers(source, enterprise.live, system["id"])
    assert before[0] == 200
    assert before[2]["meta"]["totals"]["energy_wh"] > 0

    await asyncio.to_thread(_backup_and_restore, source_url, target_url, tmp_path)

    restored = _settings(target_url, tmp_path / "restored-data")
    assert await _numbers(restored, enterprise.live, system["id"]) == before
    async with running_app(restored) as app, client_for(app, tenant.live) as client:
        assert (await client.get("/api/v1/account")).json()["plan"] == "pro"
    # The keys are stored only as HMACs under the secret: without it, none is recognised.
    lost = _settings(target_url, tmp_path / "lost-data", secret=OTHER_SECRET)
    status, _, _ = await _numbers(lost, enterprise.live, system["id"])
    assert status == 401
