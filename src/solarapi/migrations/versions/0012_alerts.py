"""Alerts and the per-system monitoring settings (issue 31).

Revision ID: 0012_alerts
Revises: 0011_performance
Create Date: 2026-11-25

`uq_alerts_open_system_type` is a partial unique index (WHERE status = 'open') on both
databases: the guarantee that a system has at most one open alert of a type, whatever two
evaluations do at the same moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0012_alerts"
down_revision = "0011_performance"
branch_labels = None
depends_on = None

_OPEN = sa.text("status = 'open'")


def upgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.add_column(
            sa.Column("monitoring_enabled", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.add_column(
            sa.Column(
                "monitoring_offline_after_hours",
                sa.Integer(),
                nullable=False,
                server_default=sa.text("4"),
            )
        )
        batch.add_column(
            sa.Column(
                "monitoring_underperformance_threshold",
                sa.Float(),
                nullable=False,
                server_default=sa.text("0.8"),
            )
        )
        batch.create_check_constraint(
            "monitoring_offline_hours", "monitoring_offline_after_hours BETWEEN 1 AND 168"
        )
        batch.create_check_constraint(
            "monitoring_threshold", "monitoring_underperformance_threshold BETWEEN 0.1 AND 1.0"
        )
    # The defaults were for the rows that exist; new rows get theirs from the application.
    with op.batch_alter_table("systems") as batch:
        for column, kind in (
            ("monitoring_enabled", sa.Boolean()),
            ("monitoring_offline_after_hours", sa.Integer()),
            ("monitoring_underperformance_threshold", sa.Float()),
        ):
            batch.alter_column(column, existing_type=kind, server_default=None)

    op.create_table(
        "alerts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column(
            "system_id",
            sa.String(40),
            sa.ForeignKey("systems.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("opened_at", UtcDateTime(), nullable=False),
        sa.Column("resolved_at", UtcDateTime(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
        sa.CheckConstraint("status IN ('open', 'resolved')", name="status"),
        sa.CheckConstraint(
            "type IN ('system.offline', 'system.zero_production', 'system.underperforming')",
            name="type",
        ),
    )
    op.create_index(
        "ix_alerts_account_env_opened", "alerts", ["account_id", "environment", "opened_at", "id"]
    )
    op.create_index("ix_alerts_system_opened", "alerts", ["system_id", "opened_at"])
    op.create_index(
        "uq_alerts_open_system_type",
        "alerts",
        ["system_id", "type"],
        unique=True,
        sqlite_where=_OPEN,
        postgresql_where=_OPEN,
    )


def downgrade() -> None:
    op.drop_index("uq_alerts_open_system_type", table_name="alerts")
    op.drop_index("ix_alerts_system_opened", table_name="alerts")
    op.drop_index("ix_alerts_account_env_opened", table_name="alerts")
    op.drop_table("alerts")
    with op.batch_alter_table("systems") as batch:
        batch.drop_constraint("monitoring_threshold", type_="check")
        batch.drop_constraint("monitoring_offline_hours", type_="check")
        batch.drop_column("monitoring_underperformance_threshold")
        batch.drop_column("monitoring_offline_after_hours")
        batch.drop_column("monitoring_enabled")
