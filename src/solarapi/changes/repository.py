"""SQL of the change feed: one statement reads a page of the log and, on PostgreSQL, the
horizon below which that page may be delivered (docs/changes.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.changes.cursor import Position
from solarapi.db import DriverQuery
from solarapi.db.horizon import snapshot_horizon
from solarapi.models.readings import ReadingChange

# Above every transaction id: where the database has no horizon (SQLite, whose writers
# commit in `seq` order), every row may be delivered.
NO_HORIZON = 2**62

_log = ReadingChange.__table__.c
_PAGE = DriverQuery(
    select(
        _log.system_id,
        _log.start_s,
        _log.energy_wh,
        _log.power_w,
        _log.txid,
        _log.seq,
        # Evaluated once, in the same statement (so the same snapshot) as the rows.
        select(snapshot_horizon()).scalar_subquery(),
    )
    .where(
        _log.account_id == bindparam("account_id"),
        _log.environment == bindparam("environment"),
        tuple_(_log.txid, _log.seq) > tuple_(bindparam("txid"), bindparam("seq")),
    )
    .order_by(_log.txid, _log.seq)
    .limit(bindparam("count"))
    .offset(bindparam("skip"))  # (SQLite's LIMIT always comes with an OFFSET parameter)
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
    rows = await _PAGE.all(
        session,
        {
            "account_id": account_id,
            "environment": environment,
            "txid": after.txid,
            "seq": after.seq,
            "count": count,
            "skip": 0,
        },
    )
    horizon = rows[0][6] if rows else None
    return LogRows(rows, NO_HORIZON if horizon is None else int(horizon))
