"""Rules of the change feed: which rows of the log a page may deliver, and where the next
page starts.

Why this never skips a change (docs/changes.md has the long form): rows are delivered in
(`txid`, `seq`, `start_s`) order — each write of readings is a batch at (`txid`, `seq`), its
rows read from `readings` — and only rows of batches whose writer's transaction id is below
the horizon of the snapshot they were read in (PostgreSQL: its xmin; SQLite: no limit, its writers are
serialised and take `seq` values in commit order) — the database backend's read,
`db.Backend.read_change_log`. Every transaction below a snapshot's
xmin has ended, and every later one gets a larger id, so once a reader has seen the rows
below a horizon no row can ever appear there again: a row written later has a larger
`txid` than any delivered one, so it sorts after the cursor. A row rewritten later (a
replaced reading) moves to the writer's new batch, so it is delivered again there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.changes import cursor, repository
from solarapi.changes.cursor import Position
from solarapi.db import LogPage
from solarapi.errors import ValidationFailed
from solarapi.kit.text import excerpt

DEFAULT_LIMIT = 1_000
MAX_LIMIT = 10_000
MAX_STREAM_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class ChangePage:
    """A page of the feed: `rows` the log's rows in commit order, as columns; `next_cursor`
    the signed position after them; `has_more` whether changes after it are already
    committed (some may be held back until an older transaction ends)."""

    rows: LogPage
    next_cursor: str
    has_more: bool


def parse_limit(raw: str | None, *, stream: bool) -> int:
    upper = MAX_STREAM_LIMIT if stream else MAX_LIMIT
    if raw is None:
        return upper if stream else DEFAULT_LIMIT
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 7 else 0
    if not 1 <= value <= upper:
        raise ValidationFailed(
            f"limit must be an integer between 1 and {upper:,}"
            + ("" if stream else " (up to 100,000 with Accept: application/x-ndjson)")
            + f"; got '{excerpt(raw)}'"
        )
    return value


async def read_changes(
    session: AsyncSession,
    principal: Principal,
    token: str | None,
    limit: int,
    *,
    secret: bytes,
    now: datetime,
) -> ChangePage:
    """`GET /readings/changes`: the caller's environment's changes after `token` (None:
    from the first stored reading). ValidationFailed for a cursor that is not valid here."""
    account_id, environment = principal.account_id, str(principal.environment)
    after = cursor.START
    if token is not None:
        after = cursor.decode(
            token, secret=secret, account_id=account_id, environment=environment, now=now
        )
        if after.version_1:
            after = await repository.translate_version_1(session, account_id, environment, after)
    log = await repository.rows_after(session, account_id, environment, after, limit)
    last = after if log.last is None else Position(*log.last)
    next_cursor = cursor.encode(
        last, secret=secret, account_id=account_id, environment=environment, now=now
    )
    return ChangePage(log, next_cursor, has_more=log.more)
