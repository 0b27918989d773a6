"""Systems, readings and their rollups (issue: systems and readings).

Revision ID: 0002_systems_readings
Revises: 0001_foundation
Create Date: 2026-11-21

Readings and rollups are keyed by (system, epoch seconds) and clustered on that key on SQLite
(WITHOUT ROWID); every range query is a scan of one contiguous key range.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0002_systems_readings"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def _system_fk() -> sa.Column[str]:
    return sa.Column(
        "system_id",
        sa.String(40),
        sa.ForeignKey("systems.id", ondelete="CASCADE"),
        primary_key=True,
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "systems",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("data_source", sa.String(20), nullable=False),
        sa.Column("capacity_kwp", sa.Float(), nullable=False),
        sa.Column("inverter_capacity_kw", sa.Float(), nullable=True),
        sa.Column("latitude", sa.Float(), nullable=False),
        sa.Column("longitude", sa.Float(), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("country", sa.String(2), nullable=True),
        sa.Column("tilt_deg", sa.Float(), nullable=False),
        sa.Column("azimuth_deg", sa.Float(), nullable=False),
        sa.Column("market_zone", sa.String(16), nullable=True),
        sa.Column("installed_on", sa.Date(), nullable=True),
        sa.Column("first_reading_at", UtcDateTime(), nullable=True),
        sa.Column("last_reading_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
        sa.CheckConstraint("status IN ('active', 'inactive', 'decommissioned')", name="status"),
        sa.CheckConstraint("data_source IN ('metered', 'simulated')", name="data_source"),
    )
    op.create_index(
        "ix_systems_account_env_created",
        "systems",
        ["account_id", "environment", "created_at", "id"],
    )
    op.create_table(
        "readings",
        _system_fk(),
        sa.Column("start_s", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("energy_wh", sa.Float(), nullable=False),
        sa.Column("power_w", sa.Float(), nullable=True),
        sqlite_with_rowid=False,
    )
    for table, key in (("reading_hours", "hour_s"), ("reading_days", "day_start_s")):
        op.create_table(
            table,
            _system_fk(),
            sa.Column(key, sa.BigInteger(), primary_key=True, autoincrement=False),
            sa.Column("energy_wh", sa.Float(), nullable=False),
            sa.Column("samples", sa.Integer(), nullable=False),
            sa.Column("power_max_w", sa.Float(), nullable=True),
            sqlite_with_rowid=False,
        )


def downgrade() -> None:
    op.drop_table("reading_days")
    op.drop_table("reading_hours")
    op.drop_table("readings")
    op.drop_index("ix_systems_account_env_created", table_name="systems")
    op.drop_table("systems")
