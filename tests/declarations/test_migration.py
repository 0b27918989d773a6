"""Migration 0004 against the models, and its way down and up again, on both databases."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, make_url

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.migrate import downgrade, upgrade
from solarapi.models import Base
from tests.support import POSTGRES_ADMIN_URL, need_service, postgres_available

MY_TABLES = {"declarations", "declaration_transitions"}


def _table_of(diff: Any) -> str | None:
    """The table an autogenerate diff is about: ('add_index', Index), ('add_table', Table),
    ('add_column', schema, table, Column), or a list of ('modify_…', schema, table, …)."""
    if isinstance(diff, list):
        return _table_of(diff[0]) if diff else None
    for part in diff[1:]:
        if isinstance(part, str) and part in MY_TABLES:
            return part
        table = getattr(part, "table", None)
        if table is not None and getattr(table, "name", None):
            return str(table.name)
        if hasattr(part, "columns") and getattr(part, "name", None):
            return str(part.name)
    return None


async def test_the_migrated_schema_matches_the_models(app: FastAPI) -> None:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    async with app.state.engine.connect() as connection:
        diffs = await connection.run_sync(compare)
    mine = [d for d in diffs if _table_of(d) in MY_TABLES]
    assert mine == []


async def _tables(settings: Settings) -> set[str]:
    engine = create_oneshot_engine(settings)
    try:
        async with engine.connect() as connection:
            return set(await connection.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


async def _admin(sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    url = make_url(POSTGRES_ADMIN_URL)
    conn = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_down_and_up_again(backend: str, tmp_path: Path) -> None:
    secret = "migration-test-secret-key-long-enough-0123456789"
    name = None
    if backend == "postgres":
        need_service("PostgreSQL", postgres_available())
        name = f"solarapi_mig_{uuid.uuid4().hex[:10]}"
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
        url = make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(False)
        settings = Settings(data_dir=tmp_path, database_url=url, secret_key=secret)
    else:
        settings = Settings(data_dir=tmp_path, secret_key=secret)
    try:
        upgrade(settings)
        assert asyncio.run(_tables(settings)) >= MY_TABLES
        downgrade(settings, "0003_market_prices")
        remaining = asyncio.run(_tables(settings))
        assert not MY_TABLES & remaining
        assert "systems" in remaining  # only this slot and the ones after it went
        upgrade(settings)
        assert asyncio.run(_tables(settings)) >= MY_TABLES
    finally:
        if name:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
