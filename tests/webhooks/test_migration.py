"""Migration 0006 against the models, and its way down and up again, on both databases."""

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
from tests.conftest import _admin
from tests.support import POSTGRES_ADMIN_URL, need_service, postgres_available

MY_TABLES = {"events", "webhook_endpoints", "webhook_deliveries", "idempotency_keys"}


def _tables_in(diff: Any) -> set[str]:
    """Every table name an autogenerate diff mentions, however deeply nested."""
    names: set[str] = set()
    stack = [diff]
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str):
            names.add(item)
        else:
            table = getattr(item, "table", None)
            for candidate in (getattr(table, "name", None), getattr(item, "name", None)):
                if isinstance(candidate, str):
                    names.add(candidate)
    return names


async def test_the_migrated_schema_matches_the_models(app: FastAPI) -> None:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    async with app.state.engine.connect() as connection:
        diffs = await connection.run_sync(compare)
    mine = [d for d in diffs if _tables_in(d) & MY_TABLES]
    assert mine == []


async def _tables(settings: Settings) -> set[str]:
    engine = create_oneshot_engine(settings)
    try:
        async with engine.connect() as connection:
            return set(await connection.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


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
        downgrade(settings, "0005_jobs_reports")
        remaining = asyncio.run(_tables(settings))
        assert not MY_TABLES & remaining
        assert {"jobs", "api_keys"} <= remaining  # only this slot and the ones after it went
        upgrade(settings)
        assert asyncio.run(_tables(settings)) >= MY_TABLES
    finally:
        if name:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
