"""SQLite's packed copy of the local-day rollup (issue 29): `reading_day_chunks`.

Revision ID: 0022_reading_day_chunks
Revises: 0021_change_batches
Create Date: 2026-11-27

A range of a system's days read from `reading_days` comes back from `sqlite3` as three Python
objects per day (~20 ms for 31 days of 1,000 systems: the portfolio's read, most of its CPU).
`reading_day_chunks` holds the same rows packed, one blob per system and `day_start_s >> 22`
(~48.5 days: a month is one or two blobs), little-endian records of (`day_start_s` int64,
`energy_wh` float64, `samples` int64, `power_max_w` float64, NaN for NULL) in time order.

Exact by construction on SQLite: triggers on `reading_days` mark a chunk stale (`days` NULL)
in the same statement as any insert, update or delete of one of its rows, by whichever writer,
and drop the chunk's row once it has no days left; the readings store packs the chunks its
rollup upsert touched again in the same transaction; a reader reads a stale chunk's days from
`reading_days`. This migration packs the days already stored. On PostgreSQL the table is
created (one schema for both databases) and stays empty: its read packs the rows in SQL.
"""

from __future__ import annotations

import itertools

import numpy as np
import sqlalchemy as sa
from alembic import context, op

revision = "0022_reading_day_chunks"
down_revision = "0021_change_batches"
branch_labels = None
depends_on = None

SHIFT = 22  # readings.store_sqlite.CHUNK_SHIFT when this was written
RECORD = np.dtype(
    [("day_start_s", "<i8"), ("energy_wh", "<f8"), ("samples", "<i8"), ("power_max_w", "<f8")]
)

# An upsert, not INSERT OR REPLACE: a trigger's conflict clause gives way to the statement's
# that fired it (the rollup's own upsert would make it ABORT).
_STALE = (
    "INSERT INTO reading_day_chunks (system_id, chunk, days) VALUES ({}, NULL)"
    " ON CONFLICT (system_id, chunk) DO UPDATE SET days = NULL"
)


def _stale(row: str) -> str:
    return _STALE.format(f"{row}.system_id, {row}.day_start_s >> {SHIFT}")


_TRIGGERS = {
    "reading_day_chunks_insert": f"AFTER INSERT ON reading_days BEGIN {_stale('NEW')}; END",
    "reading_day_chunks_update": (
        f"AFTER UPDATE ON reading_days BEGIN {_stale('OLD')}; {_stale('NEW')}; END"
    ),
    # Dropped with its last day (a deleted system's chunks go with its days).
    "reading_day_chunks_delete": (
        "AFTER DELETE ON reading_days BEGIN "  # noqa: S608 - constants
        "DELETE FROM reading_day_chunks WHERE system_id = OLD.system_id"
        f" AND chunk = OLD.day_start_s >> {SHIFT}; "
        "INSERT INTO reading_day_chunks (system_id, chunk, days)"
        f" SELECT OLD.system_id, OLD.day_start_s >> {SHIFT}, NULL WHERE EXISTS"
        " (SELECT 1 FROM reading_days WHERE system_id = OLD.system_id"
        f" AND day_start_s >= (OLD.day_start_s >> {SHIFT}) << {SHIFT}"
        f" AND day_start_s < ((OLD.day_start_s >> {SHIFT}) + 1) << {SHIFT}); END"
    ),
}


def upgrade() -> None:
    op.create_table(
        "reading_day_chunks",
        sa.Column("system_id", sa.String(length=40), nullable=False),
        sa.Column("chunk", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("days", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("system_id", "chunk", name=op.f("pk_reading_day_chunks")),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        return
    for name, body in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")
    # Every chunk of the days stored, stale (read from `reading_days`: right, if not fast);
    # packed at once when the migration runs live (`migrate --sql` prints SQL only).
    op.execute(
        "INSERT INTO reading_day_chunks (system_id, chunk, days)"  # noqa: S608 - constants
        f" SELECT DISTINCT system_id, day_start_s >> {SHIFT}, NULL FROM reading_days"
    )
    if not context.is_offline_mode():
        _pack_stored_days()


def _pack_stored_days() -> None:
    bind = op.get_bind()
    rows = bind.exec_driver_sql(
        "SELECT system_id, day_start_s, energy_wh, samples, power_max_w FROM reading_days"
        " ORDER BY system_id, day_start_s"
    ).fetchall()
    chunks = []
    for (system_id, chunk), group in itertools.groupby(
        rows, key=lambda row: (row[0], row[1] >> SHIFT)
    ):
        days = [
            (start, energy, samples, np.nan if power is None else power)
            for _, start, energy, samples, power in group
        ]
        chunks.append((system_id, chunk, np.array(days, dtype=RECORD).tobytes()))
    if chunks:
        bind.exec_driver_sql(
            "UPDATE reading_day_chunks SET days = ? WHERE system_id = ? AND chunk = ?",
            [(days, system_id, chunk) for system_id, chunk, days in chunks],
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        for name in _TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("reading_day_chunks")
