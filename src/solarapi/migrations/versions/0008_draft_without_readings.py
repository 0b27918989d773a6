"""Declaration drafts without readings (issue 14).

Revision ID: 0008_draft_without_readings
Revises: 0007_dashboard
Create Date: 2026-11-23

The contract allows a draft for a period with no reading yet (coverage 0) and gates only
submission on coverage. Its metered energy is then unknown — null, never 0 — and so is its
declared energy unless the client stated one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_draft_without_readings"
down_revision = "0007_dashboard"
branch_labels = None
depends_on = None

_COLUMNS = ("energy_wh", "metered_energy_wh")


def upgrade() -> None:
    with op.batch_alter_table("declarations") as batch:
        for column in _COLUMNS:
            batch.alter_column(column, existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    # The old schema cannot hold "no readings": such drafts read as 0 Wh again.
    op.execute(sa.text("UPDATE declarations SET energy_wh = 0 WHERE energy_wh IS NULL"))
    op.execute(
        sa.text("UPDATE declarations SET metered_energy_wh = 0 WHERE metered_energy_wh IS NULL")
    )
    with op.batch_alter_table("declarations") as batch:
        for column in _COLUMNS:
            batch.alter_column(column, existing_type=sa.Float(), nullable=False)
