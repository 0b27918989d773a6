"""Ingest tokens: per-system upload credentials for data loggers (issue 33).

Revision ID: 0014_ingest_tokens
Revises: 0013_operations
Create Date: 2026-11-25

A token is stored as the HMAC of the token under the server secret (as API keys are); it
belongs to one system and goes with it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0014_ingest_tokens"
down_revision = "0013_operations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_tokens",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "system_id",
            sa.String(40),
            sa.ForeignKey("systems.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("display", sa.String(24), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("last_used_at", UtcDateTime(), nullable=True),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_ingest_tokens_token_hash"),
    )
    op.create_index("ix_ingest_tokens_system_id", "ingest_tokens", ["system_id"])


def downgrade() -> None:
    op.drop_index("ix_ingest_tokens_system_id", table_name="ingest_tokens")
    op.drop_table("ingest_tokens")
