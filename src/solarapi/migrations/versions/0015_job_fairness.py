"""Tenant fairness on the job queue (issue 28, item 6).

Revision ID: 0015_job_fairness
Revises: 0014_ingest_tokens
Create Date: 2026-11-25

- `jobs.account_id`: whose job it is (null: the service's own), so the claim can take
  accounts in turn and cap how many jobs one account runs at once.
- `webhook_endpoints.consecutive_timeouts` / `circuit_open_until`: a circuit breaker for
  endpoints that keep timing out — their deliveries wait instead of holding a slot 10 s each.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0015_job_fairness"
down_revision = "0014_ingest_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("account_id", sa.String(40), nullable=True))
        batch.create_index("ix_jobs_account_status", ["account_id", "status"])
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.add_column(
            sa.Column("consecutive_timeouts", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("circuit_open_until", UtcDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.drop_column("circuit_open_until")
        batch.drop_column("consecutive_timeouts")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_account_status")
        batch.drop_column("account_id")
