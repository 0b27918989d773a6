"""The change feed's log at the level of batches (issue 34, design D of docs/scaling.md):
`readings.batch` and `change_batches` instead of one `reading_changes` row per reading.

Revision ID: 0021_change_batches
Revises: 0020_auth_epoch
Create Date: 2026-11-26

Every write of readings (an upload, a replacement, an import) now takes one position in the
feed, a *batch*: one `change_batches` row (`account_id`, `environment`, `txid`, `seq`,
`system_id`, `lo_s`, `hi_s`) — on PostgreSQL one per month of `start_s` the write touches,
all with the same `seq` — and writes its readings with `batch` = that `seq`. The feed reads
batches in (`txid`, `seq`) order and each batch's rows from `readings` by the primary key's
range (`system_id`, `lo_s`..`hi_s`), those whose `batch` is still that batch's `seq`
(docs/changes.md). A bulk upload's log shrinks from 10,000 rows with their values and two
index entries each to one row.

**The existing log is converted exactly, in runs**: a run is a maximal sequence of one
system's rows, of one environment and one writer's transaction, whose `seq` values are
consecutive (nothing else was logged between them) and whose `start_s` advance by 900 s within
one UTC month — a bulk upload is one run per month, an hourly upload of 4 quarter-hours one
run, irregular writes shorter runs, down to one row. Each run becomes a batch at its first
row's (`txid`, `seq`), and its readings get `batch` = that `seq`, so the rows keep their
order. A cursor issued before the migration, at position (`txid`, `s`), means "every row at or
before it was delivered"; its row lies in the run of its transaction with the greatest `seq`
<= `s`, at `lo_s` + (`s` - `seq`) x 900 (past the run's end if row `s` was replaced before the
migration: after the whole run) — `changes.repository.translate_version_1`, one indexed
lookup when such a cursor arrives, delivering exactly the rows it would have. New batches take
their `seq` from the same sequence (PostgreSQL: the log's, renamed; SQLite: the AUTOINCREMENT
counter carried over), above every old one.

**What it costs on a large database** (one release here, not the online sequence of
docs/scaling.md): the migration runs in one transaction and holds `readings` and the log
locked throughout (PostgreSQL: `ALTER TABLE readings` takes an exclusive lock that lasts until
the migration commits, so reads of readings wait as well; SQLite: against writes). Processes of
the release before it write the dropped `reading_changes`: stop them before migrating
(docs/operations.md, "Upgrades"). It inserts one `change_batches` row per run and `UPDATE`s
every reading once to set `batch`: every row of `readings` rewritten, the table's size again in
WAL and, until `VACUUM`, in dead rows. Measured:
9.6 M readings with their 9.6 M log rows (1,000 systems x 100 days in monthly partitions, a
log written one run per system and month) took 151 s on a 2-core machine at load 5.7-6.7 and
became 4,000 batches (1.4 MB; one batch per old row, tried first, made 2.4 GB); `VACUUM
ANALYZE readings` after it, 25 s.

PostgreSQL: `change_batches` is partitioned by month of `lo_s` like `readings` (its partitions
`readings_partitions.batches_<the readings partition's name>`, the same bounds), so retention
drops a month of batches with the month of readings (`readings.partitions`). Adding the
nullable `batch` column changes the catalog only. SQLite: `readings` gets the column in
place; `change_batches` keeps AUTOINCREMENT `seq` (one writer at a time: `seq` order is commit
order) and `txid` 0, one row per write.

A deleted system's batches go by the trigger `forget_system_changes` (now on `change_batches`,
by the index on (`system_id`, `lo_s`)), its readings by `forget_system_readings` (0019).

**The downgrade** rebuilds the per-reading log from what is stored: a row per reading that has
a batch, with its current values, in the feed's order, at new `seq` values above every one
the feed has handed out (the log's counter goes on from the batches': PostgreSQL's sequence,
renamed back; SQLite's AUTOINCREMENT counter, carried over even when no batch is left).
Cursors cannot be kept: those issued since this migration (version 2, 66 characters) are
unknown to the release before it, which answers them 400 `validation` ("cursor is not a
cursor of this feed; start again without a cursor"), so their clients resync from the start.
Version-1 cursors (issued before the upgrade) keep working and re-deliver the rebuilt rows of
their transaction onward (on SQLite, txid 0: every row) — never a skipped change. Upgraded
again, a version-2 cursor from before the downgrade re-delivers likewise
(`tests/changes/test_batches.py`; docs/operations.md, "Upgrades").
"""

from __future__ import annotations

from alembic import op

revision = "0021_change_batches"
down_revision = "0020_auth_epoch"
branch_labels = None
depends_on = None

# The columns after `seq`, which differs: a sequence's default on PostgreSQL, AUTOINCREMENT
# on SQLite.
_BATCH_COLUMNS = (
    " account_id VARCHAR(40) NOT NULL, environment VARCHAR(4) NOT NULL, txid BIGINT NOT NULL,"
    " system_id VARCHAR(40) NOT NULL, lo_s BIGINT NOT NULL, hi_s BIGINT NOT NULL"
)
_PG_BATCHES = (
    "CREATE TABLE change_batches ("
    " seq BIGINT NOT NULL DEFAULT nextval('public.change_batches_seq_seq'),"
    f"{_BATCH_COLUMNS}) PARTITION BY RANGE (lo_s)"
)
_SQLITE_BATCHES = (
    f"CREATE TABLE change_batches (seq INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,{_BATCH_COLUMNS})"
)
_INDEXES = (
    "CREATE INDEX ix_change_batches_feed ON change_batches (account_id, environment, txid, seq)",
    "CREATE INDEX ix_change_batches_system ON change_batches (system_id, lo_s)",
)
# The old log cut into runs: maximal sequences of one system's rows, in one environment and
# one writer's transaction, whose `seq` values are consecutive (nothing else logged between
# them) and whose `start_s` advance by 900 s within one UTC month (a month is one partition of
# `change_batches` on PostgreSQL). A bulk upload is one run (per month), an hourly upload of 4
# quarter-hours one run; irregular writes shorter runs, down to a row. Each run is a batch at
# its first row's position (`seq`, `txid`), so the rows keep their order and a version-1
# cursor (`txid`, `s`) is translated exactly: the run with the greatest `seq` <= `s`, at
# `lo_s` + (`s` - `seq`) x 900 (`changes.repository.translate_version_1`).
_RUNS = """
CREATE TABLE change_runs AS
WITH marked AS (
    SELECT account_id, environment, txid, system_id, seq, start_s,
        CASE WHEN lag(seq) OVER w = seq - 1 AND lag(start_s) OVER w = start_s - 900
            AND lag({month}) OVER w = {month} THEN 0 ELSE 1 END AS opens
    FROM reading_changes
    WINDOW w AS (PARTITION BY account_id, environment, txid, system_id ORDER BY seq)
), numbered AS (
    SELECT *, sum(opens) OVER (PARTITION BY account_id, environment, txid, system_id
        ORDER BY seq ROWS UNBOUNDED PRECEDING) AS run
    FROM marked
)
SELECT system_id, start_s, min(seq) OVER (
    PARTITION BY account_id, environment, txid, system_id, run) AS batch,
    account_id, environment, txid
FROM numbered
"""
_PG_MONTH = "date_trunc('month', to_timestamp(start_s) AT TIME ZONE 'UTC')"
_SQLITE_MONTH = "strftime('%Y-%m', start_s, 'unixepoch')"
_CONVERT = (
    "INSERT INTO change_batches (seq, account_id, environment, txid, system_id, lo_s, hi_s)"
    " SELECT batch, min(account_id), min(environment), min(txid), min(system_id),"
    " min(start_s), max(start_s) FROM change_runs GROUP BY batch"
)
_PG_FORGET = """
CREATE OR REPLACE FUNCTION forget_system_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {table} WHERE system_id = OLD.id;
    RETURN NULL;
END $$
"""
_SQLITE_TRIGGER = (
    "CREATE TRIGGER forget_system_changes AFTER DELETE ON systems"
    " BEGIN DELETE FROM {table} WHERE system_id = OLD.id; END"
)
# One partition of `parent` per partition of `readings`, named `prefix` + its name, with its
# bounds: a loop in the server, so that `migrate --sql` (offline) writes it out too.
_MIRROR_PARTITIONS = """
DO $$
DECLARE p record;
BEGIN
    FOR p IN SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE i.inhparent = 'public.readings'::regclass AND n.nspname = 'readings_partitions'
        ORDER BY 1
    LOOP
        EXECUTE format('CREATE TABLE readings_partitions.%I PARTITION OF {parent} %s',
                       '{prefix}' || p.name, p.bound);
    END LOOP;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgresql()
    else:
        _upgrade_sqlite()


def _upgrade_postgresql() -> None:
    op.execute("ALTER TABLE readings ADD COLUMN batch BIGINT")
    # The log's sequence goes on: every new batch's `seq` above every converted one.
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY NONE")
    op.execute("ALTER SEQUENCE reading_changes_seq_seq RENAME TO change_batches_seq_seq")
    op.execute(_PG_BATCHES)
    op.execute("ALTER SEQUENCE change_batches_seq_seq OWNED BY public.change_batches.seq")
    op.execute(_MIRROR_PARTITIONS.format(parent="change_batches", prefix="batches_"))
    op.execute(_RUNS.format(month=_PG_MONTH))
    op.execute(_CONVERT)
    op.execute(
        "UPDATE readings r SET batch = c.batch FROM change_runs c"
        " WHERE c.system_id = r.system_id AND c.start_s = r.start_s"
    )
    op.execute("DROP TABLE change_runs")
    for index in _INDEXES:  # after the rows: one build instead of an insert per row
        op.execute(index)
    op.execute(_PG_FORGET.format(table="change_batches"))
    op.execute("DROP TABLE reading_changes")  # and its partitions


def _upgrade_sqlite() -> None:
    op.execute("ALTER TABLE readings ADD COLUMN batch BIGINT")
    op.execute(_SQLITE_BATCHES)
    op.execute(_RUNS.format(month=_SQLITE_MONTH))
    op.execute("CREATE UNIQUE INDEX ix_change_runs ON change_runs (system_id, start_s)")
    op.execute(_CONVERT)
    # The AUTOINCREMENT counter goes on from the log's: a `seq` is never reused, and every new
    # batch's is above any a version-1 cursor can hold (the runs' batches take their first
    # row's `seq`, below the log's counter). `sqlite_sequence` has no key on `name`, so the
    # row the inserts above made is raised in place (INSERT OR REPLACE would add a second).
    op.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence"
        " WHERE name = 'reading_changes')) WHERE name = 'change_batches'"
    )
    op.execute(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'change_batches', seq FROM"
        " sqlite_sequence WHERE name = 'reading_changes' AND NOT EXISTS"
        " (SELECT 1 FROM sqlite_sequence WHERE name = 'change_batches')"
    )
    op.execute(
        "UPDATE readings SET batch = (SELECT c.batch FROM change_runs c"
        " WHERE c.system_id = readings.system_id AND c.start_s = readings.start_s)"
    )
    op.execute("DROP TABLE change_runs")
    for index in _INDEXES:
        op.execute(index)
    op.execute("DROP TRIGGER forget_system_changes")
    op.execute("DROP TABLE reading_changes")
    op.execute(_SQLITE_TRIGGER.format(table="change_batches"))


# The way down: a log row per reading that has a batch, at new positions in the feed's
# order (a cursor of either shape does not survive it: version-2 cursors are unknown there).
_LOG_COLUMNS = "seq, system_id, start_s, account_id, environment, txid, energy_wh, power_w"
_UNCONVERT = (
    f"INSERT INTO reading_changes ({_LOG_COLUMNS})"  # noqa: S608 - constants
    " SELECT {first} + row_number() OVER (ORDER BY b.txid, b.seq, r.start_s),"
    " r.system_id, r.start_s, b.account_id, b.environment, b.txid, r.energy_wh, r.power_w"
    " FROM change_batches b JOIN readings r ON r.system_id = b.system_id"
    " AND r.start_s >= b.lo_s AND r.start_s <= b.hi_s AND r.batch = b.seq"
)


# The log as 0020 left it: the columns after `seq` and its feed index.
_LOG_TABLE_COLUMNS = (
    " system_id VARCHAR(40) NOT NULL, start_s BIGINT NOT NULL, account_id VARCHAR(40) NOT NULL,"
    " environment VARCHAR(4) NOT NULL, txid BIGINT NOT NULL, energy_wh FLOAT NOT NULL,"
    " power_w FLOAT, CONSTRAINT uq_reading_changes_system_start UNIQUE (system_id, start_s)"
)
_LOG_FEED_INDEX = (
    "CREATE INDEX ix_reading_changes_feed ON reading_changes (account_id, environment, txid, seq)"
)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _downgrade_postgresql()
    else:
        _downgrade_sqlite()


def _downgrade_postgresql() -> None:
    op.execute("ALTER SEQUENCE change_batches_seq_seq OWNED BY NONE")
    op.execute("ALTER SEQUENCE change_batches_seq_seq RENAME TO reading_changes_seq_seq")
    op.execute(
        "CREATE TABLE reading_changes ("
        " seq BIGINT NOT NULL DEFAULT nextval('public.reading_changes_seq_seq'),"
        f"{_LOG_TABLE_COLUMNS}) PARTITION BY RANGE (start_s)"
    )
    op.execute("ALTER SEQUENCE reading_changes_seq_seq OWNED BY public.reading_changes.seq")
    op.execute(_MIRROR_PARTITIONS.format(parent="reading_changes", prefix="changes_"))
    op.execute(_UNCONVERT.format(first="(SELECT last_value FROM reading_changes_seq_seq)"))
    op.execute(
        "SELECT setval('reading_changes_seq_seq', greatest((SELECT max(seq) FROM"
        " reading_changes), (SELECT last_value FROM reading_changes_seq_seq)))"
    )
    op.execute(_LOG_FEED_INDEX)
    op.execute(_PG_FORGET.format(table="reading_changes"))
    op.execute("DROP TABLE change_batches")
    op.execute("ALTER TABLE readings DROP COLUMN batch")


def _downgrade_sqlite() -> None:
    op.execute(
        "CREATE TABLE reading_changes (seq INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,"
        f"{_LOG_TABLE_COLUMNS})"
    )
    op.execute(
        _UNCONVERT.format(
            first="(SELECT coalesce(max(seq), 0) FROM sqlite_sequence"
            " WHERE name = 'change_batches')"
        )
    )
    # The log's AUTOINCREMENT counter goes on from the batches', as on the way up: with no
    # batch left to convert (every system deleted) it would restart at 1, and the old
    # release's next writes would sort before its cursors, skipped.
    op.execute(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'reading_changes', 0"
        " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'reading_changes')"
    )
    op.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence"
        " WHERE name = 'change_batches'), 0)) WHERE name = 'reading_changes'"
    )
    op.execute(_LOG_FEED_INDEX)
    op.execute("DROP TRIGGER forget_system_changes")
    op.execute("DROP TABLE change_batches")
    op.execute(_SQLITE_TRIGGER.format(table="reading_changes"))
    op.execute("ALTER TABLE readings DROP COLUMN batch")
