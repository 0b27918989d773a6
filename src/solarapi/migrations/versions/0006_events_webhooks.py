"""Events, webhook endpoints, deliveries and idempotency keys (issue: webhooks).

Revision ID: 0006_events_webhooks
Revises: 0005_jobs_reports
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0006_events_webhooks"
down_revision = "0005_jobs_reports"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
