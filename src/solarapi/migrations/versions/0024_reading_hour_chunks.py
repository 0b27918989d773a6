"""SQLite's packed copy of the hourly rollup (issue 34): `reading_hour_chunks`.

Revision ID: 0024_reading_hour_chunks
Revises: 0023_day_chunks_rowid
Create Date: 2026-11-27

What 0022 and 0023 made of `reading_days`, for `reading_hours`: a rowid table holding each
system's hours packed per `hour_s >> 17` (~36.4 hours: a day of hours, the `1h` read, is one
or two blobs; 37 hours at most, 1,184 bytes, in its page), the same little-endian records
(`hour_s` int64, `energy_wh` float64, `samples` int64, `power_max_w` float64, NaN for NULL)
in time order, kept exact the same way: triggers on `reading_hours` mark a chunk stale
(`hours` NULL) in the statement that inserts, updates or deletes one of its rows, whoever
writes, and drop the chunk's row with its last hour; the readings store packs the chunks its
rollup upsert touched again in the same transaction; a reader reads a stale chunk's hours
from `reading_hours`. This migration packs the hours already stored.

SQLite only (`sqlite_only`): on PostgreSQL it does nothing (its range read packs the rows in
SQL already), and the table is declared in `models.readings.SQLITE_ONLY`, not the models of
both databases.
"""

from __future__ import annotations

import numpy as np
from alembic import context, op

revision = "0024_reading_hour_chunks"
down_revision = "0023_day_chunks_rowid"
branch_labels = None
depends_on = None
# A table of SQLite alone; nothing on PostgreSQL (tests/contract/test_migrations.py).
sqlite_only = True

ROLLUP, KEY, TABLE, COLUMN = "reading_hours", "hour_s", "reading_hour_chunks", "hours"
SHIFT = 17  # readings.store_sqlite.HOUR_CHUNKS.shift when this was written
RECORD = np.dtype([(KEY, "<i8"), ("energy_wh", "<f8"), ("samples", "<i8"), ("power_max_w", "<f8")])

_CREATE = (
    f"CREATE TABLE {TABLE} (system_id VARCHAR(40) NOT NULL, chunk BIGINT NOT NULL, "
    f"{COLUMN} BLOB, CONSTRAINT pk_{TABLE} PRIMARY KEY (system_id, chunk))"
)


def _stale(row: str) -> str:
    # An upsert, not INSERT OR REPLACE: a trigger's conflict clause gives way to the
    # statement's that fired it (the rollup's own upsert would make it ABORT).
    return (
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN}) "  # noqa: S608 - constants
        f"VALUES ({row}.system_id, {row}.{KEY} >> {SHIFT}, NULL) "
        f"ON CONFLICT (system_id, chunk) DO UPDATE SET {COLUMN} = NULL"
    )


_TRIGGERS = {
    f"{TABLE}_insert": f"AFTER INSERT ON {ROLLUP} BEGIN {_stale('NEW')}; END",
    f"{TABLE}_update": f"AFTER UPDATE ON {ROLLUP} BEGIN {_stale('OLD')}; {_stale('NEW')}; END",
    # Dropped with its last hour (a deleted system's chunks go with its hours).
    f"{TABLE}_delete": (
        f"AFTER DELETE ON {ROLLUP} BEGIN "  # noqa: S608 - constants
        f"DELETE FROM {TABLE} WHERE system_id = OLD.system_id AND chunk = OLD.{KEY} >> {SHIFT}; "
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN})"
        f" SELECT OLD.system_id, OLD.{KEY} >> {SHIFT}, NULL WHERE EXISTS"
        f" (SELECT 1 FROM {ROLLUP} WHERE system_id = OLD.system_id"
        f" AND {KEY} >= (OLD.{KEY} >> {SHIFT}) << {SHIFT}"
        f" AND {KEY} < ((OLD.{KEY} >> {SHIFT}) + 1) << {SHIFT}); END"
    ),
}


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    op.execute(_CREATE)
    for name, body in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")
    # Every chunk of the hours stored, stale (read from `reading_hours`: right, if not fast);
    # packed at once when the migration runs live (`migrate --sql` prints SQL only).
    op.execute(
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN})"  # noqa: S608 - constants
        f" SELECT DISTINCT system_id, {KEY} >> {SHIFT}, NULL FROM {ROLLUP}"
    )
    if not context.is_offline_mode():
        _pack_stored_hours()


def _pack_stored_hours() -> None:
    """Each system's hours in one read (a year is 8,784 rows), packed as the store packs."""
    bind = op.get_bind()
    found = bind.exec_driver_sql(f"SELECT DISTINCT system_id FROM {TABLE}")  # noqa: S608
    systems = [row[0] for row in found]
    for system_id in systems:
        rows = bind.exec_driver_sql(
            f"SELECT {KEY}, energy_wh, samples, power_max_w FROM {ROLLUP}"  # noqa: S608
            f" WHERE system_id = ? ORDER BY {KEY}",
            (system_id,),
        ).fetchall()
        records = np.fromiter(map(tuple, rows), RECORD, len(rows))  # NULL power as NaN
        chunk = records[KEY] >> SHIFT
        cuts = np.flatnonzero(chunk[1:] != chunk[:-1]) + 1
        bind.exec_driver_sql(
            f"UPDATE {TABLE} SET {COLUMN} = ? WHERE system_id = ? AND chunk = ?",  # noqa: S608
            [
                (part.tobytes(), system_id, int(part[KEY][0]) >> SHIFT)
                for part in np.split(records, cuts)
            ],
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER {name}")
    op.execute(f"DROP TABLE {TABLE}")
