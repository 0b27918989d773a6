"""Migration 0002 (systems, readings, rollups) against the models, and down and up again."""

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

TABLES = {"systems", "readings", "reading_hours", "reading_days"}


def _names(diff: Any) -> set[str]:
    """Every table name an autogenerate diff mentions (tuples, nested lists, objects)."""
    found: set[str] = set()
    parts = diff if isinstance(diff, list) else [diff]
    for part in parts:
        for piece in part if isinstance(part, tuple) else (part,):
            if isinstance(piece, str):
                found.add(piece)
            for holder in (piece, getattr(piece, "table", None)):
                name = getattr(holder, "name", None)
                if isinstance(name, str):
                    found.add(name)
    return found


async def test_the_migrated_schema_matches_the_models(app: FastAPI) -> None:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    async with app.state.engine.connect() as connection:
        diffs = await connection.run_sync(compare)
    assert [diff for diff in diffs if _names(diff) & TABLES] == []


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
    database = None
    if backend == "postgres":
        need_service("PostgreSQL", postgres_available())
        database = f"solarapi_mig_{uuid.uuid4().hex[:10]}"
        asyncio.run(_admin(f'CREATE DATABASE "{database}"'))
        url = make_url(POSTGRES_ADMIN_URL).set(database=database)
        settings = Settings(
            data_dir=tmp_path, database_url=url.render_as_string(False), secret_key=secret
        )
    else:
        settings = Settings(data_dir=tmp_path, secret_key=secret)
    try:
        upgrade(settings)
        assert asyncio.run(_tables(settings)) >= TABLES
        downgrade(settings, "0001_foundation")
        remaining = asyncio.run(_tables(settings))
        assert not TABLES & remaining
        assert "accounts" in remaining
        upgrade(settings)
        assert asyncio.run(_tables(settings)) >= TABLES
    finally:
        if database:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
