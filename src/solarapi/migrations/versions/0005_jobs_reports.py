"""Job queue and reports (issue: reports).

Revision ID: 0005_jobs_reports
Revises: 0004_declarations
Create Date: 2026-11-21

A reserved slot in the chain: the issue named above fills it in.
"""

from __future__ import annotations

revision = "0005_jobs_reports"
down_revision = "0004_declarations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
