"""Readings and their rollups without a foreign key to `systems` (issue 34): a trigger on
`systems` deletes a deleted system's rows, as `ON DELETE CASCADE` did.

Revision ID: 0019_readings_without_fk
Revises: 0018_change_log_partitions
Create Date: 2026-11-26

A foreign key checks its parent row once per row written (PostgreSQL: a trigger per row that
looks the system up `FOR KEY SHARE`). For a bulk upload that check cost more than the row:
COPY of 10,000 quarter-hours into `readings` took 121 ms with it and 45 ms without, and an
upload's 2,500 new hourly rollup rows about twice the time with it (bench/readings/README.md).
The change feed's log lost its key the same way in `0018_change_log_partitions`.

Why a row without its system still cannot be written: **every writer of a system's readings
or rollups holds the system's row lock, and writes nothing when the system is gone.**

- Uploads of new quarter-hours in one statement (`ReadingStore.store_new`, PostgreSQL: the
  API's `POST /systems/{id}/readings` and `POST /ingest/readings`, large batches by COPY
  after it): the statement's `UPDATE systems … RETURNING` takes the row lock; every
  `INSERT` selects `FROM sys`, and the COPY runs in the same transaction only when the
  statement returned the system. No system, nothing written.
- Every other upload (replacing uploads, uploads inside a transaction: the dashboard's and
  the CLI's CSV imports `solarapi readings import`, SQLite's uploads, ingest tokens and
  keys alike) goes through `readings.upload._locked`, which takes the lock
  (`systems.repository.lock_fresh`: PostgreSQL `SELECT … FOR UPDATE`, SQLite the database's
  write lock) and reads the system afresh under it: gone means 404, nothing written.
- Demo data and benchmarks (`readings.upload.store_series`): the same `_locked`.
- A new time zone rebuilds the daily rollup (`systems.service.update_system`) under
  `lock_fresh` taken first.
- The sandbox stores no readings (its systems' series are computed); retention only
  deletes.
- A deletion takes the same lock (deleting the row), so it waits for a writer that holds
  it and the writer, once the deletion committed, finds no row.

A deleted system's rows go by the trigger `forget_system_readings` (AFTER DELETE on
`systems`, beside 0018's `forget_system_changes`); `systems.repository.delete_system` still
deletes them itself first, and account erasure (`admin.repository`) finds them through the
columns' declared owner (`info={"owner": "systems.id"}` in `models.readings`), as it finds
rows through a foreign key.

PostgreSQL: dropping a foreign key changes the catalog only (no scan): `readings` and its
partitions, and both rollups, are locked for an instant. Partitions made later by
`readings.partitions` inherit no key. The way down adds the keys back validated: a scan of
each table under a lock that lets reads go on but holds writes (a partitioned table takes no
`NOT VALID` foreign key on PostgreSQL 15).

SQLite: the same shape (one set of models for both databases, and account erasure reads it):
SQLite alters no constraint in place, so the three tables are rebuilt without the key, once —
about 260,000 rows/s here (2 M quarter-hours in 7.7 s at load 9.5), a minute at most for an
embedded database of a few years of a hundred systems. SQLite's foreign key cost little
(a B-tree probe per row, no trigger), so this buys it nothing but the one shape.
"""

from __future__ import annotations

from alembic import op

revision = "0019_readings_without_fk"
down_revision = "0018_change_log_partitions"
branch_labels = None
depends_on = None

# Each table, its time key and its other columns (as 0002 made them).
_TABLES = (
    ("readings", "start_s", " energy_wh FLOAT NOT NULL, power_w FLOAT,"),
    (
        "reading_hours",
        "hour_s",
        " energy_wh FLOAT NOT NULL, samples INTEGER NOT NULL, power_max_w FLOAT,",
    ),
    (
        "reading_days",
        "day_start_s",
        " energy_wh FLOAT NOT NULL, samples INTEGER NOT NULL, power_max_w FLOAT,",
    ),
)
_DELETES = " ".join(
    f"DELETE FROM {table} WHERE system_id = OLD.id;"  # noqa: S608 - constants
    for table, _, _ in _TABLES
)

_PG_FORGET = f"""
CREATE FUNCTION forget_system_readings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_DELETES}
    RETURN NULL;
END $$
"""
_PG_TRIGGER = (
    "CREATE TRIGGER forget_system_readings AFTER DELETE ON systems"
    " FOR EACH ROW EXECUTE FUNCTION forget_system_readings()"
)
_SQLITE_TRIGGER = (
    f"CREATE TRIGGER forget_system_readings AFTER DELETE ON systems BEGIN {_DELETES} END"
)


def _foreign_key(table: str) -> str:
    return (
        f"CONSTRAINT fk_{table}_system_id_systems FOREIGN KEY (system_id)"
        " REFERENCES systems (id) ON DELETE CASCADE"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FORGET)
        op.execute(_PG_TRIGGER)
        for table, _, _ in _TABLES:
            op.execute(f"ALTER TABLE {table} DROP CONSTRAINT fk_{table}_system_id_systems")
    else:
        for table, key, columns in _TABLES:
            _sqlite_rebuild(table, key, columns, foreign_key="")
        op.execute(_SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, _, _ in _TABLES:
            op.execute(f"ALTER TABLE {table} ADD {_foreign_key(table)}")
        op.execute("DROP TRIGGER forget_system_readings ON systems")
        op.execute("DROP FUNCTION forget_system_readings()")
    else:
        op.execute("DROP TRIGGER forget_system_readings")
        for table, key, columns in _TABLES:
            _sqlite_rebuild(table, key, columns, foreign_key=f", {_foreign_key(table)}")


def _sqlite_rebuild(table: str, key: str, columns: str, *, foreign_key: str) -> None:
    """Rebuild `table` (SQLite alters no constraint in place), clustered on its key as
    before (WITHOUT ROWID), and put it in the old one's place."""
    op.execute(
        f"CREATE TABLE {table}_new (system_id VARCHAR(40) NOT NULL, {key} BIGINT NOT NULL,"
        f"{columns} CONSTRAINT pk_{table} PRIMARY KEY (system_id, {key}){foreign_key})"
        " WITHOUT ROWID"
    )
    op.execute(f"INSERT INTO {table}_new SELECT * FROM {table}")  # noqa: S608 - constants
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
