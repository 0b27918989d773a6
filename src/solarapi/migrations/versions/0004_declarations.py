"""Declarations and their history (issue: declarations).

Revision ID: 0004_declarations
Revises: 0003_market_prices
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0004_declarations"
down_revision = "0003_market_prices"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
