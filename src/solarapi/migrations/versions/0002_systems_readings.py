"""Systems, readings and their rollups (issue: systems and readings).

Revision ID: 0002_systems_readings
Revises: 0001_foundation
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0002_systems_readings"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
