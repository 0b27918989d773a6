"""Market prices per zone (issue: market prices).

Revision ID: 0003_market_prices
Revises: 0002_systems_readings
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0003_market_prices"
down_revision = "0002_systems_readings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
