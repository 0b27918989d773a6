"""SQLite's packed copy of the raw quarter-hours (issue 34): `reading_chunks`.

Revision ID: 0025_reading_chunks
Revises: 0024_reading_hour_chunks
Create Date: 2026-11-27

What 0022 and 0024 made of the rollups, for `readings` itself: a rowid table holding each
system's quarter-hours packed per `start_s >> 16` (~18.2 hours: the last 24 hours at `15m`,
the fleet's poll, is two or three blobs; 73 quarter-hours at most, 1,752 bytes, in its page),
little-endian records (`start_s` int64, `energy_wh` float64, `power_w` float64, NaN for
NULL) in time order. `sqlite3` hands a read's rows over as Python objects, three per
quarter-hour, each step of the statement releasing and taking the GIL: a day of one
system's quarter-hours cost more in that than the rest of its request.

Kept exact as the rollups' chunks are: triggers on `readings` mark a chunk stale
(`quarters` NULL) in the statement that inserts, updates or deletes one of its rows,
whoever writes, and drop the chunk's row with its last quarter-hour; the readings store
packs the chunks its upsert touched again in the same transaction; a reader reads a stale
chunk's quarter-hours from `readings`. This migration packs the quarter-hours already
stored (one read of each system's rows).

SQLite only (`sqlite_only`): on PostgreSQL it does nothing, and the table is declared in
`models.readings.SQLITE_ONLY`.
"""

from __future__ import annotations

import numpy as np
from alembic import context, op

revision = "0025_reading_chunks"
down_revision = "0024_reading_hour_chunks"
branch_labels = None
depends_on = None
# A table of SQLite alone; nothing on PostgreSQL (tests/contract/test_migrations.py).
sqlite_only = True

TABLE, KEY, COLUMN = "reading_chunks", "start_s", "quarters"
SHIFT = 16  # readings.store_sqlite.RAW_CHUNKS.shift when this was written
RECORD = np.dtype([(KEY, "<i8"), ("energy_wh", "<f8"), ("power_w", "<f8")])

_CREATE = (
    f"CREATE TABLE {TABLE} (system_id VARCHAR(40) NOT NULL, chunk BIGINT NOT NULL, "
    f"{COLUMN} BLOB, CONSTRAINT pk_{TABLE} PRIMARY KEY (system_id, chunk))"
)


def _stale(row: str) -> str:
    # An upsert, not INSERT OR REPLACE: a trigger's conflict clause gives way to the
    # statement's that fired it (the readings' own upsert would make it ABORT).
    return (
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN}) "  # noqa: S608 - constants
        f"VALUES ({row}.system_id, {row}.{KEY} >> {SHIFT}, NULL) "
        f"ON CONFLICT (system_id, chunk) DO UPDATE SET {COLUMN} = NULL"
    )


# Not again for a chunk already stale: a bulk upload's thousands of rows fall in a few dozen
# chunks, and the look-up costs less than the upsert.
_FRESH = (
    f"WHEN NOT EXISTS (SELECT 1 FROM {TABLE} WHERE system_id = NEW.system_id"  # noqa: S608
    f" AND chunk = NEW.{KEY} >> {SHIFT} AND {COLUMN} IS NULL)"
)

_TRIGGERS = {
    f"{TABLE}_insert": f"AFTER INSERT ON readings {_FRESH} BEGIN {_stale('NEW')}; END",
    # A replaced quarter-hour keeps its key: its chunk marked once, and OLD's only when a
    # statement moves a row (the store's upsert sets neither column: that trigger never runs).
    f"{TABLE}_update": f"AFTER UPDATE ON readings {_FRESH} BEGIN {_stale('NEW')}; END",
    f"{TABLE}_move": (
        f"AFTER UPDATE OF system_id, {KEY} ON readings WHEN OLD.system_id IS NOT NEW.system_id"
        f" OR (OLD.{KEY} >> {SHIFT}) <> (NEW.{KEY} >> {SHIFT}) BEGIN {_stale('OLD')}; END"
    ),
    # Dropped with its last quarter-hour (a deleted system's chunks go with its readings).
    f"{TABLE}_delete": (
        "AFTER DELETE ON readings BEGIN "  # noqa: S608 - constants
        f"DELETE FROM {TABLE} WHERE system_id = OLD.system_id AND chunk = OLD.{KEY} >> {SHIFT}; "
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN})"
        f" SELECT OLD.system_id, OLD.{KEY} >> {SHIFT}, NULL WHERE EXISTS"
        f" (SELECT 1 FROM readings WHERE system_id = OLD.system_id"
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
    # Every chunk of the quarter-hours stored, stale (read from `readings`: right, if not
    # fast); packed at once when the migration runs live (`migrate --sql` prints SQL only).
    op.execute(
        f"INSERT INTO {TABLE} (system_id, chunk, {COLUMN})"  # noqa: S608 - constants
        f" SELECT DISTINCT system_id, {KEY} >> {SHIFT}, NULL FROM readings"
    )
    if not context.is_offline_mode():
        _pack_stored_quarters()


def _pack_stored_quarters() -> None:
    """Each system's quarter-hours in one read, packed as the store packs."""
    bind = op.get_bind()
    found = bind.exec_driver_sql(f"SELECT DISTINCT system_id FROM {TABLE}")  # noqa: S608
    systems = [row[0] for row in found]
    for system_id in systems:
        rows = bind.exec_driver_sql(
            f"SELECT {KEY}, energy_wh, power_w FROM readings"  # noqa: S608
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
