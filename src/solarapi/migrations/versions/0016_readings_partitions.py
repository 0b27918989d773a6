"""`readings` partitioned by month on PostgreSQL (issue 34); SQLite keeps one table.

Revision ID: 0016_readings_partitions
Revises: 0015_job_fairness
Create Date: 2026-11-25

The existing table becomes the partition of everything before next month (every stored
reading has ended, so it holds nothing later) without being scanned under an exclusive lock:
a `CHECK (start_s < cut-over)` is added `NOT VALID`,
validated (a scan that lets writes go on), and `ATTACH PARTITION` then trusts it. New months
get partitions of their own, created ahead (here, then by the daily `readings.partitions`
job); a `DEFAULT` partition catches a reading no month holds, so an upload never fails for
want of a partition. Partitions live in their own schema (`readings_partitions`), so the
application's schema is exactly its models and tools that list tables see one `readings`.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from alembic import op

revision = "0016_readings_partitions"
down_revision = "0015_job_fairness"
branch_labels = None
depends_on = None
# Changes nothing on SQLite (one table there, by design).
postgresql_only = True

SCHEMA = "readings_partitions"
MONTHS_AHEAD = 3


def _month_starts(first: datetime, count: int) -> list[datetime]:
    months = []
    year, month = first.year, first.month
    for _ in range(count + 1):
        months.append(datetime(year, month, 1, tzinfo=UTC))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    now = datetime.now(UTC)
    # Every stored reading has ended (it starts before now), so none is at or after the first
    # instant of next month: the table as it is becomes the partition of everything before it.
    months = _month_starts(datetime(now.year, now.month, 1, tzinfo=UTC), MONTHS_AHEAD + 1)[1:]
    cut_over = int(months[0].timestamp())
    # The CHECK that lets ATTACH skip its scan, added and validated in transactions of their
    # own: NOT VALID takes the table's lock for an instant, VALIDATE scans while writes go on.
    # Inside the migration's transaction the lock of the first would be held through the scan.
    with op.get_context().autocommit_block():
        op.execute(
            "ALTER TABLE readings ADD CONSTRAINT before_cut_over_range"
            f" CHECK (start_s < {cut_over}) NOT VALID"
        )
        op.execute("ALTER TABLE readings VALIDATE CONSTRAINT before_cut_over_range")
    op.execute(f"CREATE SCHEMA {SCHEMA}")
    op.execute(f"ALTER TABLE readings SET SCHEMA {SCHEMA}")
    op.execute(f"ALTER TABLE {SCHEMA}.readings RENAME TO before_cut_over")
    op.execute(f"ALTER INDEX {SCHEMA}.pk_readings RENAME TO pk_before_cut_over")
    op.execute(
        "CREATE TABLE readings ("
        " system_id VARCHAR(40) NOT NULL,"
        " start_s BIGINT NOT NULL,"
        " energy_wh FLOAT NOT NULL,"
        " power_w FLOAT,"
        " CONSTRAINT pk_readings PRIMARY KEY (system_id, start_s),"
        " CONSTRAINT fk_readings_system_id_systems FOREIGN KEY (system_id)"
        " REFERENCES systems (id) ON DELETE CASCADE"
        ") PARTITION BY RANGE (start_s)"
    )
    op.execute(
        f"ALTER TABLE readings ATTACH PARTITION {SCHEMA}.before_cut_over"
        f" FOR VALUES FROM (MINVALUE) TO ({cut_over})"
    )
    # The CHECK did its work (the attach trusted it); the partition bound now says the same.
    op.execute(f"ALTER TABLE {SCHEMA}.before_cut_over DROP CONSTRAINT before_cut_over_range")
    for start, end in itertools.pairwise(months):
        op.execute(
            f"CREATE TABLE {SCHEMA}.m{start:%Y_%m} PARTITION OF readings"
            f" FOR VALUES FROM ({int(start.timestamp())}) TO ({int(end.timestamp())})"
        )
    op.execute(f"CREATE TABLE {SCHEMA}.outside_every_month PARTITION OF readings DEFAULT")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE readings RENAME TO readings_partitioned")
    op.execute("ALTER INDEX pk_readings RENAME TO pk_readings_partitioned")
    op.execute(
        "CREATE TABLE readings ("
        " system_id VARCHAR(40) NOT NULL,"
        " start_s BIGINT NOT NULL,"
        " energy_wh FLOAT NOT NULL,"
        " power_w FLOAT,"
        " CONSTRAINT pk_readings PRIMARY KEY (system_id, start_s),"
        " CONSTRAINT fk_readings_system_id_systems FOREIGN KEY (system_id)"
        " REFERENCES systems (id) ON DELETE CASCADE"
        ")"
    )
    op.execute(
        "INSERT INTO readings SELECT system_id, start_s, energy_wh, power_w FROM readings_partitioned"
    )
    op.execute("DROP TABLE readings_partitioned")
    op.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
