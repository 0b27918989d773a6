"""SQL of the change feed: one statement reads a page of the log and, on PostgreSQL, the
horizon below which that page may be delivered (docs/changes.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.changes.cursor import Position
from solarapi.db import fetch_rows

# Above every transaction id: SQLite has no horizon (its writers commit in `seq` order).
NO_HORIZON = 2**62

_COLUMNS = "system_id, start_s, energy_wh, power_w, txid, seq"
_POSTGRES = (
    f"SELECT {_COLUMNS}, "  # noqa: S608 - constants
    # The snapshot's xmin: every transaction below it has ended, every one still running
    # (or still to come) is at or above it. The same statement's snapshot as the rows'.
    "(SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint) AS horizon "
    "FROM reading_changes WHERE account_id = $1 AND environment = $2 "
    "AND (txid, seq) > ($3, $4) ORDER BY txid, seq LIMIT $5"
)
_SQLITE = (
    f"SELECT {_COLUMNS} FROM reading_changes "  # noqa: S608 - constants
    "WHERE account_id = ? AND environment = ? AND (txid, seq) > (?, ?) "
    "ORDER BY txid, seq LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class LogRows:
    """Rows of the log after a position (`system_id, start_s, energy_wh, power_w, txid,
    seq` each), and the horizon: only rows with `txid` below it may be delivered."""

    rows: Sequence[Sequence[Any]]
    horizon: int


async def rows_after(
    session: AsyncSession, account_id: str, environment: str, after: Position, count: int
) -> LogRows:
    """Up to `count` rows of the environment's log after `after`, in (`txid`, `seq`) order,
    read in one statement (one snapshot)."""
    if session.get_bind().dialect.name == "postgresql":
        params = (account_id, environment, after.txid, after.seq, count)
        rows = await fetch_rows(session, _POSTGRES, params)
        if rows:
            return LogRows(rows, int(rows[0][6]))
        # Nothing after the position: no row needs a horizon.
        return LogRows(rows, NO_HORIZON)
    rows = await fetch_rows(
        session, _SQLITE, (account_id, environment, after.txid, after.seq, count)
    )
    return LogRows(rows, NO_HORIZON)
