"""A killed test run cannot drop its PostgreSQL databases; the next run drops them (those of
test processes that are gone), and never another running process's or a foreign database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

from tests.support import (
    admin,
    admin_connection,
    drop_stale_databases,
    need_service,
    new_database_name,
    postgres_available,
)


def _gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def _names() -> set[str]:
    conn = await admin_connection()
    try:
        return {row[0] for row in await conn.fetch("SELECT datname FROM pg_database")}
    finally:
        await conn.close()


def test_databases_of_gone_processes_are_dropped_and_others_kept() -> None:
    need_service("PostgreSQL", postgres_available())
    suffix = uuid.uuid4().hex[:10]
    gone = f"solarapi_test_p{_gone_pid()}_{suffix}"
    gone_moved = f"solarapi_fault_p{_gone_pid()}_{suffix}_moved"
    mine = new_database_name("test")
    foreign = f"solarapi_keep_{suffix}"  # not a test database's name: never touched
    for name in (gone, gone_moved, mine, foreign):
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        dropped = asyncio.run(drop_stale_databases())
        left = asyncio.run(_names())
        assert {gone, gone_moved} <= set(dropped)
        assert gone not in left
        assert gone_moved not in left
        assert mine in left
        assert foreign in left
        assert mine not in dropped
        assert foreign not in dropped
    finally:
        for name in (gone, gone_moved, mine, foreign):
            asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
