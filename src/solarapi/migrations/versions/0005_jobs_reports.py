"""Job queue and reports (issue: reports).

Revision ID: 0005_jobs_reports
Revises: 0004_declarations
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0005_jobs_reports"
down_revision = "0004_declarations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("run_at", UtcDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", UtcDateTime(), nullable=True),
        sa.Column("heartbeat_at", UtcDateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("finished_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="status"
        ),
    )
    op.create_index("ix_jobs_status_run_at", "jobs", ["status", "run_at"])
    op.create_table(
        "reports",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("job_id", sa.String(40), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("completed_at", UtcDateTime(), nullable=True),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.Column("file_name", sa.String(200), nullable=True),
        sa.Column("content_type", sa.String(60), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("file_removed_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'completed', 'failed')", name="status"),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
    )
    op.create_index(
        "ix_reports_account_env_created",
        "reports",
        ["account_id", "environment", "created_at", "id"],
    )
    op.create_index("ix_reports_expires_at", "reports", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_reports_expires_at", table_name="reports")
    op.drop_index("ix_reports_account_env_created", table_name="reports")
    op.drop_table("reports")
    op.drop_index("ix_jobs_status_run_at", table_name="jobs")
    op.drop_table("jobs")
