"""Declarations and their history (issue: declarations).

Revision ID: 0004_declarations
Revises: 0003_market_prices
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0004_declarations"
down_revision = "0003_market_prices"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "declarations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("system_id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("period_start", sa.Date(), nullable=False),
        sa.Column("period_end", sa.Date(), nullable=False),
        sa.Column("energy_wh", sa.Float(), nullable=False),
        sa.Column("metered_energy_wh", sa.Float(), nullable=False),
        sa.Column("coverage", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("reference", sa.String(100), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("submitted_at", UtcDateTime(), nullable=True),
        sa.Column("decided_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_declarations"),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_declarations_account_id_accounts",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["system_id"],
            ["systems.id"],
            name="fk_declarations_system_id_systems",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "type IN ('guarantee_of_origin', 'production_subsidy', 'feed_in')",
            name="ck_declarations_type",
        ),
        sa.CheckConstraint(
            "status IN ('draft', 'submitted', 'approved', 'rejected', 'withdrawn')",
            name="ck_declarations_status",
        ),
        sa.CheckConstraint("environment IN ('live', 'test')", name="ck_declarations_environment"),
        sa.CheckConstraint("period_start <= period_end", name="ck_declarations_period"),
    )
    op.create_index(
        "ix_declarations_account_env_created",
        "declarations",
        ["account_id", "environment", "created_at"],
    )
    op.create_index("ix_declarations_system_type", "declarations", ["system_id", "type"])
    op.create_table(
        "declaration_transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("declaration_id", sa.String(40), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("actor", sa.String(40), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=True),
        sa.Column("to_status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_declaration_transitions"),
        sa.ForeignKeyConstraint(
            ["declaration_id"],
            ["declarations.id"],
            name="fk_declaration_transitions_declaration_id_declarations",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_declaration_transitions_declaration_id",
        "declaration_transitions",
        ["declaration_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_declaration_transitions_declaration_id", table_name="declaration_transitions")
    op.drop_table("declaration_transitions")
    op.drop_index("ix_declarations_system_type", table_name="declarations")
    op.drop_index("ix_declarations_account_env_created", table_name="declarations")
    op.drop_table("declarations")
