"""Events, webhook endpoints, deliveries and idempotency keys (issue: webhooks).

Revision ID: 0006_events_webhooks
Revises: 0005_jobs_reports
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0006_events_webhooks"
down_revision = "0005_jobs_reports"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
    )
    op.create_index(
        "ix_events_account_env_created",
        "events",
        ["account_id", "environment", "created_at", "id"],
    )
    op.create_index("ix_events_created_at", "events", ["created_at"])

    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.String(500), nullable=True),
        sa.Column("secret_salt", sa.String(64), nullable=False),
        sa.Column("previous_secret_salt", sa.String(64), nullable=True),
        sa.Column("previous_salt_expires_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
    )
    op.create_index(
        "ix_webhook_endpoints_account_env",
        "webhook_endpoints",
        ["account_id", "environment", "created_at"],
    )

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "endpoint_id",
            sa.String(40),
            sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "event_id",
            sa.String(40),
            sa.ForeignKey("events.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("attempted_at", UtcDateTime(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("succeeded", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("next_attempt_at", UtcDateTime(), nullable=True),
    )
    op.create_index(
        "ix_webhook_deliveries_endpoint_attempted",
        "webhook_deliveries",
        ["endpoint_id", "attempted_at", "id"],
    )
    op.create_index("ix_webhook_deliveries_event", "webhook_deliveries", ["event_id"])

    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "api_key_id",
            sa.String(40),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("method", sa.String(10), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("completed_at", UtcDateTime(), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        # The unique constraint is the lock that makes concurrent duplicates run once.
        sa.UniqueConstraint("api_key_id", "idempotency_key"),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_created_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    op.drop_index("ix_webhook_deliveries_event", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_endpoint_attempted", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhook_endpoints_account_env", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
    op.drop_index("ix_events_created_at", table_name="events")
    op.drop_index("ix_events_account_env_created", table_name="events")
    op.drop_table("events")
