"""Migration 0003 up, down and up again, on SQLite and PostgreSQL, on databases of its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.migrate import downgrade, upgrade
from tests.conftest import TEST_SECRET, _admin
from tests.support import POSTGRES_ADMIN_URL, need_service, postgres_available


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    if request.param == "sqlite":
        yield Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
        return
    need_service("PostgreSQL", postgres_available())
    name = f"solarapi_mig_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield Settings(data_dir=tmp_path, database_url=url, secret_key=TEST_SECRET)
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _tables(settings: Settings) -> set[str]:
    async def names() -> set[str]:
        engine = create_oneshot_engine(settings)
        try:
            async with engine.connect() as connection:
                found = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
                return set(found)
        finally:
            await engine.dispose()

    return asyncio.run(names())


def test_migration_0003_up_down_up(fresh_settings: Settings) -> None:
    upgrade(fresh_settings, "0003_market_prices")
    assert {"market_prices", "market_price_zones"} <= _tables(fresh_settings)
    downgrade(fresh_settings, "0002_systems_readings")
    tables = _tables(fresh_settings)
    assert "market_prices" not in tables
    assert "market_price_zones" not in tables
    assert "systems" in tables
    upgrade(fresh_settings, "0003_market_prices")
    assert {"market_prices", "market_price_zones"} <= _tables(fresh_settings)
