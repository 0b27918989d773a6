"""Reads of the change feed's log. The statement differs between the databases (the horizon
below which a page may be delivered, and how the rows are packed), so it is the database
backend's (`db.Backend.read_change_log`, docs/changes.md)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.changes.cursor import Position
from solarapi.db import LogPage, session_backend


async def rows_after(
    session: AsyncSession, account_id: str, environment: str, after: Position, count: int
) -> LogPage:
    """Up to `count` deliverable rows of the environment's log after `after`, in (`txid`,
    `seq`, `start_s`) order, read in one statement (one snapshot)."""
    return await session_backend(session).read_change_log(
        session,
        account_id=account_id,
        environment=environment,
        after=(after.txid, after.seq, after.start_s),
        limit=count,
    )
