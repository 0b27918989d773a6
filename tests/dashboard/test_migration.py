"""Migration 0007 (web sessions) against the model, and down and up again, on both databases."""

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

SECRET = "dashboard-migration-secret-0123456789-abcdef"


def _mentions_web_sessions(diff: Any) -> bool:
    return "web_sessions" in repr(diff)


async def test_the_migrated_table_matches_the_model(app: FastAPI) -> None:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    async with app.state.engine.connect() as connection:
        diffs = await connection.run_sync(compare)
    assert [d for d in diffs if _mentions_web_sessions(d)] == []


async def _table_state(settings: Settings) -> tuple[set[str], set[str]]:
    engine = create_oneshot_engine(settings)

    def read(connection: Connection) -> tuple[set[str], set[str]]:
        inspector = inspect(connection)
        tables = set(inspector.get_table_names())
        indexes = (
            {ix["name"] or "" for ix in inspector.get_indexes("web_sessions")}
            if "web_sessions" in tables
            else set()
        )
        return tables, indexes

    try:
        async with engine.connect() as connection:
            return await connection.run_sync(read)
    finally:
        await engine.dispose()


async def _postgres_admin(sql: str) -> None:
    import asyncpg

    url = make_url(POSTGRES_ADMIN_URL)
    connection = await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=url.database
    )
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_down_and_up_again(backend: str, tmp_path: Path) -> None:
    database = None
    if backend == "postgres":
        need_service("PostgreSQL", postgres_available())
        database = f"solarapi_dash_{uuid.uuid4().hex[:10]}"
        asyncio.run(_postgres_admin(f'CREATE DATABASE "{database}"'))
        url = make_url(POSTGRES_ADMIN_URL).set(database=database)
        settings = Settings(
            data_dir=tmp_path,
            database_url=url.render_as_string(hide_password=False),
            secret_key=SECRET,
        )
    else:
        settings = Settings(data_dir=tmp_path, secret_key=SECRET)
    try:
        upgrade(settings)
        tables, indexes = asyncio.run(_table_state(settings))
        assert "web_sessions" in tables
        assert {"ix_web_sessions_user_id", "ix_web_sessions_expires_at"} <= indexes
        downgrade(settings, "0006_events_webhooks")
        tables, _ = asyncio.run(_table_state(settings))
        assert "web_sessions" not in tables
        assert "users" in tables  # only this slot's table went
        upgrade(settings)
        tables, _ = asyncio.run(_table_state(settings))
        assert "web_sessions" in tables
    finally:
        if database:
            asyncio.run(_postgres_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
