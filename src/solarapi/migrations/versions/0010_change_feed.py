"""The change feed's log of readings (issue 29).

Revision ID: 0010_change_feed
Revises: 0008_draft_without_readings
Create Date: 2026-11-25

`reading_changes` holds one row per stored reading with the position at which it last
changed (`txid`, `seq`); the readings stored before this revision enter it at position
(0, n), so a client without a cursor gets them first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_change_feed"
down_revision = "0008_draft_without_readings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reading_changes",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "system_id",
            sa.String(40),
            sa.ForeignKey("systems.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("start_s", sa.BigInteger(), nullable=False),
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.Column("energy_wh", sa.Float(), nullable=False),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.UniqueConstraint("system_id", "start_s", name="uq_reading_changes_system_start"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_reading_changes_feed",
        "reading_changes",
        ["account_id", "environment", "txid", "seq"],
    )
    # The readings stored so far, in (system, time) order, below every later change.
    op.execute(
        sa.text(
            "INSERT INTO reading_changes "
            "(system_id, start_s, account_id, environment, txid, energy_wh, power_w) "
            "SELECT r.system_id, r.start_s, s.account_id, s.environment, 0, r.energy_wh, "
            "r.power_w FROM readings r JOIN systems s ON s.id = r.system_id "
            "WHERE s.data_source = 'metered' ORDER BY r.system_id, r.start_s"
        )
    )


def downgrade() -> None:
    op.drop_index("ix_reading_changes_feed", table_name="reading_changes")
    op.drop_table("reading_changes")
