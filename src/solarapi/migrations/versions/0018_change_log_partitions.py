"""The change feed's log (issue 34): no foreign-key check per row, and on PostgreSQL monthly
partitions like `readings`.

Revision ID: 0018_change_log_partitions
Revises: 0017_system_data_version
Create Date: 2026-11-26

`reading_changes` checked its system's row for each row written (the foreign key's trigger),
and retention deleted its rows one by one. Now:

- **No foreign key.** Every writer of a system's log holds the system's row lock and finds it
  there (an upload's statement writes nothing when the system is gone), so a row without its
  system cannot be written; a trigger on `systems` removes a deleted system's rows, as
  `ON DELETE CASCADE` did.
- **PostgreSQL: partitioned by month of `start_s`**, in the schema `readings_partitions`
  (`changes_m2026_12`, …), so retention drops a month of the log with its readings instead of
  deleting it row by row. A partitioned table's unique keys must hold the partition key, so
  `seq` is no longer a primary key (nothing looked rows up by it); `(system_id, start_s)` is
  the unique key. Converted as `0016_readings_partitions` converts `readings`: a `CHECK`
  added `NOT VALID`, validated in a transaction of its own (a scan that lets writes go on),
  then the table attached as the partition of everything before the cut-over without a scan.
  Dropping the primary key and the foreign key changes the catalog only.

The log keeps the readings' values (`energy_wh`, `power_w`): the feed reads a page from the
log alone; reading them from `readings` by key, one probe per row, cost the page about three
times the database's CPU. SQLite keeps one table (rebuilt without the foreign key: a small
deployment's log).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from alembic import op

revision = "0018_change_log_partitions"
down_revision = "0017_system_data_version"
branch_labels = None
depends_on = None

SCHEMA = "readings_partitions"
MONTHS_AHEAD = 3

_PG_FORGET = """
CREATE FUNCTION forget_system_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM reading_changes WHERE system_id = OLD.id;
    RETURN NULL;
END $$
"""
_PG_TRIGGER = (
    "CREATE TRIGGER forget_system_changes AFTER DELETE ON systems"
    " FOR EACH ROW EXECUTE FUNCTION forget_system_changes()"
)
_SQLITE_TRIGGER = (
    "CREATE TRIGGER forget_system_changes AFTER DELETE ON systems"
    " BEGIN DELETE FROM reading_changes WHERE system_id = OLD.id; END"
)


def _month_starts(first: datetime, count: int) -> list[datetime]:
    months = []
    year, month = first.year, first.month
    for _ in range(count + 1):
        months.append(datetime(year, month, 1, tzinfo=UTC))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgresql()
    else:
        _upgrade_sqlite()


def _upgrade_postgresql() -> None:
    now = datetime.now(UTC)
    months = _month_starts(datetime(now.year, now.month, 1, tzinfo=UTC), MONTHS_AHEAD + 1)[1:]
    cut_over = int(months[0].timestamp())
    # Every logged reading has ended: none starts at or after next month. The CHECK lets the
    # attach below skip its scan; added NOT VALID and validated outside the migration's
    # transaction, so the table is locked for an instant, not for the scan.
    with op.get_context().autocommit_block():
        op.execute(
            "ALTER TABLE reading_changes ADD CONSTRAINT changes_before_cut_over_range"
            f" CHECK (start_s < {cut_over}) NOT VALID"
        )
        op.execute("ALTER TABLE reading_changes VALIDATE CONSTRAINT changes_before_cut_over_range")
    op.execute("ALTER TABLE reading_changes DROP CONSTRAINT fk_reading_changes_system_id_systems")
    op.execute(_PG_FORGET)
    op.execute(_PG_TRIGGER)
    op.execute("ALTER TABLE reading_changes DROP CONSTRAINT pk_reading_changes")
    # An owned sequence would move (and later be dropped) with the table: it stays, and
    # belongs to the partitioned table's column below.
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY NONE")
    op.execute(f"ALTER TABLE reading_changes SET SCHEMA {SCHEMA}")
    op.execute(f"ALTER TABLE {SCHEMA}.reading_changes RENAME TO changes_before_cut_over")
    op.execute(
        f"ALTER INDEX {SCHEMA}.uq_reading_changes_system_start RENAME TO uq_changes_before_cut_over"
    )
    op.execute(f"ALTER INDEX {SCHEMA}.ix_reading_changes_feed RENAME TO ix_changes_before_cut_over")
    op.execute(
        "CREATE TABLE reading_changes ("
        " seq BIGINT NOT NULL DEFAULT nextval('public.reading_changes_seq_seq'),"
        " system_id VARCHAR(40) NOT NULL,"
        " start_s BIGINT NOT NULL,"
        " account_id VARCHAR(40) NOT NULL,"
        " environment VARCHAR(4) NOT NULL,"
        " txid BIGINT NOT NULL,"
        " energy_wh FLOAT NOT NULL,"
        " power_w FLOAT,"
        " CONSTRAINT uq_reading_changes_system_start UNIQUE (system_id, start_s)"
        ") PARTITION BY RANGE (start_s)"
    )
    op.execute(
        "CREATE INDEX ix_reading_changes_feed ON reading_changes"
        " (account_id, environment, txid, seq)"
    )
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY public.reading_changes.seq")
    op.execute(
        f"ALTER TABLE reading_changes ATTACH PARTITION {SCHEMA}.changes_before_cut_over"
        f" FOR VALUES FROM (MINVALUE) TO ({cut_over})"
    )
    op.execute(
        f"ALTER TABLE {SCHEMA}.changes_before_cut_over"
        " DROP CONSTRAINT changes_before_cut_over_range"
    )
    for start, end in itertools.pairwise(months):
        op.execute(
            f"CREATE TABLE {SCHEMA}.changes_m{start:%Y_%m} PARTITION OF reading_changes"
            f" FOR VALUES FROM ({int(start.timestamp())}) TO ({int(end.timestamp())})"
        )
    op.execute(
        f"CREATE TABLE {SCHEMA}.changes_outside_every_month PARTITION OF reading_changes DEFAULT"
    )


_COLUMNS = "seq, system_id, start_s, account_id, environment, txid, energy_wh, power_w"
_SQLITE_LOG = (
    "CREATE TABLE reading_changes_new ("
    " seq INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,"
    " system_id VARCHAR(40) NOT NULL,"
    " start_s BIGINT NOT NULL,"
    " account_id VARCHAR(40) NOT NULL,"
    " environment VARCHAR(4) NOT NULL,"
    " txid BIGINT NOT NULL,"
    " energy_wh FLOAT NOT NULL,"
    " power_w FLOAT,"
    " CONSTRAINT uq_reading_changes_system_start UNIQUE (system_id, start_s){foreign_key})"
)
_SQLITE_FOREIGN_KEY = (
    ", CONSTRAINT fk_reading_changes_system_id_systems FOREIGN KEY (system_id)"
    " REFERENCES systems (id) ON DELETE CASCADE"
)


def _upgrade_sqlite() -> None:
    _sqlite_rebuild(foreign_key="")
    op.execute(_SQLITE_TRIGGER)


def _sqlite_rebuild(foreign_key: str) -> None:
    """Rebuild the log (SQLite alters no constraint in place) and put it in the old one's
    place, keeping the AUTOINCREMENT counter: a `seq` is never reused, even one of a deleted
    row, or a cursor past it would skip the row that took it again."""
    op.execute(_SQLITE_LOG.format(foreign_key=foreign_key))
    op.execute(
        f"INSERT INTO reading_changes_new ({_COLUMNS}) SELECT {_COLUMNS} FROM reading_changes"  # noqa: S608 - constants
    )
    op.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence"
        " WHERE name = 'reading_changes'), 0)) WHERE name = 'reading_changes_new'"
    )
    op.execute(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'reading_changes_new', seq"
        " FROM sqlite_sequence WHERE name = 'reading_changes' AND NOT EXISTS"
        " (SELECT 1 FROM sqlite_sequence WHERE name = 'reading_changes_new')"
    )
    op.execute("DROP TABLE reading_changes")
    op.execute("ALTER TABLE reading_changes_new RENAME TO reading_changes")
    op.execute(
        "CREATE INDEX ix_reading_changes_feed ON reading_changes"
        " (account_id, environment, txid, seq)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _downgrade_postgresql()
    else:
        _downgrade_sqlite()


def _downgrade_postgresql() -> None:
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY NONE")
    op.execute("ALTER TABLE reading_changes RENAME TO reading_changes_partitioned")
    op.execute("ALTER INDEX ix_reading_changes_feed RENAME TO ix_reading_changes_feed_partitioned")
    op.execute(
        "ALTER TABLE reading_changes_partitioned"
        " RENAME CONSTRAINT uq_reading_changes_system_start TO uq_reading_changes_partitioned"
    )
    op.execute(
        "CREATE TABLE reading_changes ("
        " seq BIGINT NOT NULL DEFAULT nextval('public.reading_changes_seq_seq'),"
        " system_id VARCHAR(40) NOT NULL,"
        " start_s BIGINT NOT NULL,"
        " account_id VARCHAR(40) NOT NULL,"
        " environment VARCHAR(4) NOT NULL,"
        " txid BIGINT NOT NULL,"
        " energy_wh FLOAT NOT NULL,"
        " power_w FLOAT,"
        " CONSTRAINT pk_reading_changes PRIMARY KEY (seq),"
        " CONSTRAINT uq_reading_changes_system_start UNIQUE (system_id, start_s),"
        " CONSTRAINT fk_reading_changes_system_id_systems FOREIGN KEY (system_id)"
        " REFERENCES systems (id) ON DELETE CASCADE)"
    )
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY public.reading_changes.seq")
    op.execute(
        f"INSERT INTO reading_changes ({_COLUMNS})"  # noqa: S608 - constants
        f" SELECT {_COLUMNS} FROM reading_changes_partitioned"
    )
    op.execute(
        "CREATE INDEX ix_reading_changes_feed ON reading_changes"
        " (account_id, environment, txid, seq)"
    )
    op.execute("DROP TABLE reading_changes_partitioned")
    op.execute("DROP TRIGGER forget_system_changes ON systems")
    op.execute("DROP FUNCTION forget_system_changes()")


def _downgrade_sqlite() -> None:
    op.execute("DROP TRIGGER forget_system_changes")
    _sqlite_rebuild(foreign_key=_SQLITE_FOREIGN_KEY)
