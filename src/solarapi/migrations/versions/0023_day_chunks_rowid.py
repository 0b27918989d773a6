"""`reading_day_chunks` as a rowid table on SQLite (issue 29).

Revision ID: 0023_day_chunks_rowid
Revises: 0022_reading_day_chunks
Create Date: 2026-11-27

0022 made `reading_day_chunks` a `WITHOUT ROWID` table, whose rows live in an index b-tree:
there a row keeps at most ~1,000 bytes of a 4,096-byte page in place and the rest goes to
overflow pages. A full chunk is 1,552 bytes (48.5 days × 32), so every full chunk was read
through an overflow page: 2,000 chunks (a month of 1,000 systems) took 13.2 ms in SQLite
against 3.4 ms from a rowid table (its primary key an index beside it; measured on a
1,000-system year, bench/portfolio/README.md). This rebuilds the table with the same
columns, key and rows; the triggers of 0022 on `reading_days` name the table and stay as they
are (the rename runs with `legacy_alter_table` on, so SQLite does not re-check them while the
name is briefly gone). PostgreSQL: nothing (its table has no such option and stays empty).
"""

from __future__ import annotations

from alembic import op

revision = "0023_day_chunks_rowid"
down_revision = "0022_reading_day_chunks"
branch_labels = None
depends_on = None
# Changes how SQLite stores a table; nothing on PostgreSQL (tests/contract/test_migrations.py).
sqlite_only = True

_TABLE = (
    "CREATE TABLE reading_day_chunks_new ("
    "system_id VARCHAR(40) NOT NULL, chunk BIGINT NOT NULL, days BLOB, "
    "CONSTRAINT pk_reading_day_chunks PRIMARY KEY (system_id, chunk)){}"
)


def _rebuild(options: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    op.execute(_TABLE.format(options))
    op.execute(
        "INSERT INTO reading_day_chunks_new (system_id, chunk, days)"
        " SELECT system_id, chunk, days FROM reading_day_chunks ORDER BY system_id, chunk"
    )
    op.execute("DROP TABLE reading_day_chunks")
    op.execute("PRAGMA legacy_alter_table = ON")
    op.execute("ALTER TABLE reading_day_chunks_new RENAME TO reading_day_chunks")
    op.execute("PRAGMA legacy_alter_table = OFF")


def upgrade() -> None:
    _rebuild("")


def downgrade() -> None:
    _rebuild(" WITHOUT ROWID")
