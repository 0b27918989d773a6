"""Market prices per zone (issue: market prices).

Revision ID: 0003_market_prices
Revises: 0002_systems_readings
Create Date: 2026-11-21

One row per published day-ahead price period of a bidding zone, keyed by (zone, start), and
one version counter per zone that every import bumps (readers cache by it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from solarapi.models.base import UtcDateTime

revision = "0003_market_prices"
down_revision = "0002_systems_readings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "market_prices",
        sa.Column("zone", sa.String(16), nullable=False),
        sa.Column("start", UtcDateTime(), nullable=False),
        sa.Column("resolution_s", sa.Integer(), nullable=False),
        sa.Column("price_eur_per_mwh", sa.Float(precision=53), nullable=False),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("imported_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("zone", "start", name="pk_market_prices"),
        sa.CheckConstraint("resolution_s IN (900, 1800, 3600)", name="resolution"),
        sa.CheckConstraint("source IN ('entsoe', 'csv', 'simulated')", name="source"),
    )
    op.create_table(
        "market_price_zones",
        sa.Column("zone", sa.String(16), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("market_price_zones")
    op.drop_table("market_prices")
