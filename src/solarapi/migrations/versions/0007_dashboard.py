"""Dashboard sessions and login throttling (issue: dashboard).

Revision ID: 0007_dashboard
Revises: 0006_events_webhooks
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0007_dashboard"
down_revision = "0006_events_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
