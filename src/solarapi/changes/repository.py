"""Reads of the change feed's log. The statement differs between the databases (the horizon
below which a page may be delivered, and how the rows are packed), so it is the database
backend's (`db.Backend.read_change_log`, docs/changes.md)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.changes.cursor import AFTER_BATCH, Position
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


# The batch of the environment's log in the writer's transaction `txid` with the greatest
# `seq` at or before a version-1 position's: the run of the old log the migration made it.
_RUN_OF = text(
    "SELECT seq, lo_s, hi_s FROM change_batches WHERE account_id = :account_id"
    " AND environment = :environment AND txid = :txid AND seq <= :seq"
    " ORDER BY seq DESC, lo_s LIMIT 1"
)


async def translate_version_1(
    session: AsyncSession, account_id: str, environment: str, old: Position
) -> Position:
    """A version-1 cursor's position — after the old log's row (`txid`, `seq`) — in the
    batch-level log. Migration 0021 made each run of the old log (one system's rows with
    consecutive `seq` whose `start_s` advance by 900 s, within a UTC month) a batch at its
    first row's `seq`, so row `seq` of a run is the batch's quarter-hour `lo_s` + (`seq` -
    batch) x 900; a `seq` past the run's end (a row replaced before the migration) is after
    the whole batch, and one before every batch of its transaction is after (`txid`, `seq`)
    itself. Every batch written since has a larger `seq` than any version-1 cursor holds."""
    found = (
        await session.execute(
            _RUN_OF,
            {"account_id": account_id, "environment": environment,
             "txid": old.txid, "seq": old.seq},
        )
    ).first()  # fmt: skip
    if found is None:
        return Position(old.txid, old.seq)
    batch, lo_s, hi_s = (int(value) for value in found)
    start_s = lo_s + (old.seq - batch) * 900
    return Position(old.txid, batch, start_s if start_s <= hi_s else AFTER_BATCH)
