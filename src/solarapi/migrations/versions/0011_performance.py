"""Performance: measured irradiance and the per-system model overrides (issue 30).

Revision ID: 0011_performance
Revises: 0010_change_feed
Create Date: 2026-11-25

`irradiance` holds uploaded (`sensor`) and imported (`satellite`) quarter-hours, clustered on
(system, source, quarter-hour) on SQLite like the readings. Systems gain the model overrides
(NULL = default) and whether their orientation is the contract's default; systems created
before this revision are taken to have been given theirs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_performance"
down_revision = "0010_change_feed"
branch_labels = None
depends_on = None

_OVERRIDES = ("model_gamma_pdc_pct_per_c", "model_losses_pct", "model_inverter_efficiency")
_FLAGS = ("tilt_defaulted", "azimuth_defaulted")


def upgrade() -> None:
    op.create_table(
        "irradiance",
        sa.Column(
            "system_id",
            sa.String(40),
            sa.ForeignKey("systems.id", ondelete="CASCADE"),
            primary_key=True,
            nullable=False,
        ),
        sa.Column("source", sa.String(10), primary_key=True, nullable=False),
        sa.Column("start_s", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("poa_w_m2", sa.Float(), nullable=True),
        sa.Column("ghi_w_m2", sa.Float(), nullable=True),
        sa.Column("dni_w_m2", sa.Float(), nullable=True),
        sa.Column("dhi_w_m2", sa.Float(), nullable=True),
        sa.Column("module_temp_c", sa.Float(), nullable=True),
        sa.Column("ambient_temp_c", sa.Float(), nullable=True),
        sa.CheckConstraint("source IN ('sensor', 'satellite')", name="source"),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("systems") as batch:
        for column in _OVERRIDES:
            batch.add_column(sa.Column(column, sa.Float(), nullable=True))
        for column in _FLAGS:
            batch.add_column(
                sa.Column(column, sa.Boolean(), nullable=False, server_default=sa.false())
            )


def downgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        for column in (*_FLAGS, *_OVERRIDES):
            batch.drop_column(column)
    op.drop_table("irradiance")
