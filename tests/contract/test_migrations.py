"""The migration chain against the models, and every revision's way down and up again, on
SQLite and PostgreSQL. One test for the whole chain, so a new slot cannot go untested."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi import FastAPI
from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import Connection

from solarapi.cli_support import redacted
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.dbfaults import SCHEMA_REVISION
from solarapi.migrate import alembic_config, downgrade, upgrade
from solarapi.models import Base
from solarapi.models.readings import SQLITE_ONLY
from tests.support import (
    DATABASES,
    TEST_SECRET,
    admin,
    database_url,
    need_service,
    new_database_name,
    postgres_available,
    run_cli,
    settings_env,
)


def _models(settings: Settings) -> list[MetaData]:
    """The tables the database's schema must hold: the models of both databases, and on
    SQLite its own (`models.readings.SQLITE_ONLY`)."""
    return [Base.metadata, SQLITE_ONLY] if settings.is_sqlite else [Base.metadata]


def _model_tables(settings: Settings) -> set[str]:
    return {name for metadata in _models(settings) for name in metadata.tables}


async def test_the_migrated_schema_matches_the_models(app: FastAPI) -> None:
    def compare(connection: Connection) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        # (Alembic compares with a list of MetaData as with one.)
        return list(compare_metadata(context, _models(app.state.settings)))  # type: ignore[arg-type]

    async with app.state.engine.connect() as connection:
        diffs = await connection.run_sync(compare)
    assert diffs == []


_PARTITIONED_TABLES = (
    "SELECT c.relname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
)


def _schema(settings: Settings) -> tuple[set[str], set[str]]:
    """Table names and index names of the database."""
    tables, indexes, _ = _schema_and_columns(settings)
    return tables, indexes


def _schema_and_columns(settings: Settings) -> tuple[set[str], set[str], set[str]]:
    """Table names, index names and `table.column null|not null` of the database (with
    `table references other` for each foreign key)."""

    async def read() -> tuple[set[str], set[str], set[str]]:
        engine = create_oneshot_engine(settings)
        try:
            async with engine.connect() as connection:

                def inspect_all(sync: Connection) -> tuple[set[str], set[str], set[str]]:
                    inspector = inspect(sync)
                    tables = set(inspector.get_table_names()) - {"alembic_version"}
                    indexes = {
                        str(index["name"])
                        for table in tables
                        for index in inspector.get_indexes(table)
                        if index["name"]
                    }
                    columns = {
                        f"{table}.{column['name']} {'null' if column['nullable'] else 'not null'}"
                        for table in tables
                        for column in inspector.get_columns(table)
                    }
                    # A foreign key dropped or added changes no column: a mark of its own.
                    columns |= {
                        f"{table} references {key['referred_table']}"
                        for table in tables
                        for key in inspector.get_foreign_keys(table)
                    }
                    # Partitioning changes no column: it shows as a mark of its own.
                    if sync.dialect.name == "postgresql":
                        columns |= {
                            f"{name} partitioned"
                            for (name,) in sync.execute(text(_PARTITIONED_TABLES))
                        }
                    # So does SQLite's storage of a table: a mark for each WITHOUT ROWID one.
                    if sync.dialect.name == "sqlite":
                        columns |= {
                            f"{name} without rowid"
                            for name, sql in sync.execute(
                                text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                            )
                            if sql and sql.rstrip().upper().endswith("WITHOUT ROWID")
                        }
                    return tables, indexes, columns

                return await connection.run_sync(inspect_all)
        finally:
            await engine.dispose()

    return asyncio.run(read())


@pytest.fixture(params=DATABASES)
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    if request.param == "sqlite":
        yield Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
        return
    need_service("PostgreSQL", postgres_available())
    name = new_database_name("mig")
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield Settings(data_dir=tmp_path, database_url=database_url(name), secret_key=TEST_SECRET)
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# Revisions that replace a table: the table their way down creates again.
_RESTORES = {"0021_change_batches": {"reading_changes"}}


def test_every_revision_goes_down_and_up_again(empty_database: Settings) -> None:
    settings = empty_database
    script = ScriptDirectory.from_config(alembic_config(settings))
    revisions = list(reversed(list(script.walk_revisions())))  # oldest first
    assert [r.down_revision for r in revisions[1:]] == [r.revision for r in revisions[:-1]]

    upgrade(settings)
    head_tables, head_indexes = _schema(settings)
    assert head_tables == _model_tables(settings)

    # Walk down one revision at a time: each takes away exactly what it created (or changes
    # columns back), the tables of the revisions below it stay.
    removed_by: dict[str, set[str]] = {}
    tables, _, columns = _schema_and_columns(settings)
    for revision in reversed(revisions):
        target = revision.down_revision or "base"
        downgrade(settings, str(target))
        remaining, _, remaining_columns = _schema_and_columns(settings)
        # A revision that replaces a table brings the old one back on the way down.
        restored = _RESTORES.get(revision.revision, set())
        assert remaining <= tables | restored, (
            f"{revision.revision} going down created {remaining - tables}"
        )
        removed_by[revision.revision] = (tables - remaining) | (columns ^ remaining_columns)
        tables, columns = remaining, remaining_columns
    assert tables == set()
    for revision in revisions:
        # A revision for PostgreSQL alone (`postgresql_only = True`) changes nothing on SQLite.
        if settings.is_sqlite and getattr(revision.module, "postgresql_only", False):
            assert not removed_by[revision.revision]
            continue
        # A revision of SQLite's storage alone (`sqlite_only = True`) changes nothing on
        # PostgreSQL.
        if not settings.is_sqlite and getattr(revision.module, "sqlite_only", False):
            assert not removed_by[revision.revision]
            continue
        assert removed_by[revision.revision], f"{revision.revision} changes nothing"

    upgrade(settings)
    assert _schema(settings) == (head_tables, head_indexes)


def test_the_schema_revision_the_app_needs_is_alembics_head(sqlite_settings: Settings) -> None:
    """/health and the 503 of an unmigrated database compare with SCHEMA_REVISION, read from
    the file names (Alembic is too slow to import at start-up): it must be the real head."""
    script = ScriptDirectory.from_config(alembic_config(sqlite_settings))
    assert script.get_heads() == [SCHEMA_REVISION]
    for revision in script.walk_revisions():
        assert revision.revision[:4].isdigit()
        assert Path(str(revision.path)).stem == revision.revision


def test_migrate_says_what_it_did(empty_database: Settings) -> None:
    settings = empty_database
    env = settings_env(settings, SOLARAPI_REDIS_URL="")
    head = ScriptDirectory.from_config(alembic_config(settings)).get_current_head()
    assert head is not None
    created = run_cli(env, "migrate").stderr
    assert f"created the schema in {settings.database_url.split('://')[0]}" in created
    assert f"(revision {head})" in created

    again = run_cli(env, "migrate").stderr
    assert f"is already up to date (revision {head})" in again
    assert "created" not in again

    previous = ScriptDirectory.from_config(alembic_config(settings)).get_revision(head)
    downgrade(settings, str(previous.down_revision))
    upgraded = run_cli(env, "migrate").stderr
    assert "upgraded the schema" in upgraded
    assert f"from revision {previous.down_revision} to {head}" in upgraded


def test_migrate_check_and_sql_change_nothing(empty_database: Settings) -> None:
    settings = empty_database
    env = settings_env(settings)
    pending = run_cli(env, "migrate", "--check", check=False)
    assert pending.returncode == 1
    assert f"migration(s) pending for {settings.database_url.split('://')[0]}" in pending.stderr
    assert "0001_foundation" in pending.stderr
    assert SCHEMA_REVISION in pending.stderr
    sql = run_cli(env, "migrate", "--sql", check=False)
    if settings.is_postgres:
        assert "CREATE TABLE accounts" in sql.stdout
        assert "CREATE TABLE audit_events" in sql.stdout
    else:  # a revision rebuilds a table: SQLite's batch mode must read it live
        assert sql.returncode == 1
        assert "SQLite's batch mode cannot print" in sql.stderr
        assert "Traceback" not in sql.stderr
    assert _schema(settings)[0] == set()  # nothing was run

    run_cli(env, "migrate")
    current = run_cli(env, "migrate", "--check")
    assert f"is up to date (revision {SCHEMA_REVISION})" in current.stderr
    nothing = run_cli(env, "migrate", "--sql")
    assert nothing.stdout.strip() == ""  # stdout is the SQL: none
    assert f"no migration pending for {redacted(settings.database_url)}" in nothing.stderr
    assert f"(revision {SCHEMA_REVISION}): no SQL to print" in nothing.stderr

    # One step behind: --check names it, --sql prints only that step.
    previous = ScriptDirectory.from_config(alembic_config(settings)).get_revision(SCHEMA_REVISION)
    downgrade(settings, str(previous.down_revision))
    behind = run_cli(env, "migrate", "--check", check=False)
    assert behind.returncode == 1
    assert "1 migration(s) pending" in behind.stderr
    assert f"at {previous.down_revision}" in behind.stderr
    step = run_cli(env, "migrate", "--sql", check=False)
    if settings.is_postgres:
        assert step.returncode == 0, step.stderr
        assert f"Running upgrade {previous.down_revision} -> {SCHEMA_REVISION}" in step.stdout
        assert "CREATE TABLE accounts" not in step.stdout
    else:  # the newest revision (0027) rebuilds idempotency_keys: refused, nothing printed
        assert step.returncode == 1
        assert "SQLite's batch mode cannot print" in step.stderr
        assert step.stdout.strip() == ""
    run_cli(env, "migrate")
