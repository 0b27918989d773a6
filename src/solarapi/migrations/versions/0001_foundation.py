"""Foundation: accounts, users and API keys.

Revision ID: 0001_foundation
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0001_foundation"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("plan", sa.String(20), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("sandbox_provisioned_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint("plan IN ('starter', 'pro', 'enterprise')", name="plan"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(200), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_users_account_id", "users", ["account_id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("display", sa.String(24), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("last_used_at", UtcDateTime(), nullable=True),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint("environment IN ('live', 'test')", name="environment"),
    )
    op.create_index("ix_api_keys_account_env", "api_keys", ["account_id", "environment"])


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_index("ix_users_account_id", table_name="users")
    op.drop_table("users")
    op.drop_table("accounts")
