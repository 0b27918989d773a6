"""Migration `0019_readings_without_fk` on a database that holds data, both ways, on SQLite
and PostgreSQL: readings and rollups keep every row, lose (and get back) their foreign key to
`systems`, and a deleted system's rows go either way (the trigger, then the key's cascade)."""

from __future__ import annotations

import asyncio

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from tests.reports.helpers import JUNE_1, make_system, upload_readings
from tests.support import (
    client_for,
    execute_sql,
    make_tenant,
    running_app,
)

BEFORE = "0018_change_log_partitions"
WITHOUT_FK = "0019_readings_without_fk"
TABLES = ("readings", "reading_hours", "reading_days", "reading_changes")
ROLLUP_AND_RAW = TABLES[:3]


async def _rows(settings: Settings) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the four tables, in key order (the log without its position)."""
    rows = {}
    for table in TABLES:
        columns = "system_id, start_s, energy_wh, power_w" if table == "reading_changes" else "*"
        rows[table] = await execute_sql(settings, f"SELECT {columns} FROM {table} ORDER BY 1, 2")  # noqa: S608
    return rows


async def _foreign_keys(
    settings: Settings, tables: tuple[str, ...] = TABLES
) -> dict[str, list[tuple[str, str | None]]]:
    """Each table's foreign keys: (referred table, ON DELETE)."""
    engine = create_oneshot_engine(settings)
    try:
        async with engine.connect() as connection:

            def read(sync: Connection) -> dict[str, list[tuple[str, str | None]]]:
                inspector = inspect(sync)
                return {
                    table: [
                        (key["referred_table"], key["options"].get("ondelete"))
                        for key in inspector.get_foreign_keys(table)
                    ]
                    for table in tables
                }

            return await connection.run_sync(read)
    finally:
        await engine.dispose()


def _of(rows: dict[str, list[tuple[object, ...]]], system_id: str) -> dict[str, int]:
    return {table: sum(1 for row in found if row[0] == system_id) for table, found in rows.items()}


async def test_the_migration_keeps_every_row_and_a_deleted_systems_rows_go_both_ways(
    blank_database: Settings,
) -> None:
    settings = blank_database
    # The data is written by today's code (which needs the head's schema, `auth_epoch` among
    # it), then the database goes down to 0018 with it: a database at 0018 that holds data.
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            doomed = (await make_system(client, "Doomed", "Europe/Amsterdam"))["id"]
            kept = (await make_system(client, "Kept", "Australia/Adelaide"))["id"]
            for system_id in (doomed, kept):
                await upload_readings(client, {"id": system_id, "capacity_kwp": 10.0}, JUNE_1, 96)
    await asyncio.to_thread(downgrade, settings, BEFORE)
    before = await _rows(settings)
    for system_id in (doomed, kept):
        counts = _of(before, system_id)
        assert counts["readings"] == counts["reading_changes"] == 96
        assert counts["reading_hours"] == 24
        assert counts["reading_days"] == 2  # 1 June UTC spans two local days in both zones
    with_keys = {table: [("systems", "CASCADE")] for table in ROLLUP_AND_RAW}
    assert await _foreign_keys(settings) == {**with_keys, "reading_changes": []}

    await asyncio.to_thread(upgrade, settings, WITHOUT_FK)

    assert await _rows(settings) == before
    assert await _foreign_keys(settings) == {table: [] for table in TABLES}
    # No key, and still nothing of a deleted system is left: the trigger on `systems`.
    await execute_sql(settings, f"DELETE FROM systems WHERE id = '{doomed}'")  # noqa: S608
    after_delete = await _rows(settings)
    assert _of(after_delete, doomed) == dict.fromkeys(TABLES, 0)
    assert _of(after_delete, kept) == _of(before, kept)

    # Down again: every row kept, the keys back (validated) with their cascade.
    await asyncio.to_thread(downgrade, settings, BEFORE)
    assert await _rows(settings) == after_delete
    assert await _foreign_keys(settings) == {**with_keys, "reading_changes": []}
    if not settings.is_sqlite:
        validated = await execute_sql(
            settings,
            "SELECT conrelid::regclass::text, convalidated FROM pg_constraint WHERE contype = 'f'"
            " AND conrelid IN ('readings'::regclass, 'reading_hours'::regclass,"
            " 'reading_days'::regclass) ORDER BY 1",
        )
        assert validated == [(table, True) for table in sorted(ROLLUP_AND_RAW)]
    await execute_sql(settings, f"DELETE FROM systems WHERE id = '{kept}'")  # noqa: S608
    assert await _rows(settings) == {table: [] for table in TABLES}

    await asyncio.to_thread(upgrade, settings)
    # At the head the change feed's log is `change_batches` (0021): no key either.
    head = (*ROLLUP_AND_RAW, "change_batches")
    assert await _foreign_keys(settings, head) == {table: [] for table in head}
