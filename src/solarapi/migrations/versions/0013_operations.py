"""Account administration and the audit trail (issue 32).

Revision ID: 0013_operations
Revises: 0012_alerts
Create Date: 2026-11-25

`accounts.disabled_at`: set by `solarapi accounts disable`; a disabled account's keys are
refused and its users cannot log in. `audit_events`: key and token changes, plan and password
changes, log-ins and failed log-ins, account disable/enable/delete (`solarapi audit list`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0013_operations"
down_revision = "0012_alerts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("disabled_at", UtcDateTime(), nullable=True))
    op.create_table(
        "audit_events",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("occurred_at", UtcDateTime(), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("account_id", sa.String(40), nullable=True),
        sa.Column("subject", sa.String(320), nullable=True),
        sa.Column("ip", sa.String(45), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_audit_events_account_occurred", "audit_events", ["account_id", "occurred_at"]
    )
    op.create_index("ix_audit_events_occurred", "audit_events", ["occurred_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_occurred", table_name="audit_events")
    op.drop_index("ix_audit_events_account_occurred", table_name="audit_events")
    op.drop_table("audit_events")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("disabled_at")
