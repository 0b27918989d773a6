"""Systems gain `data_version`: a counter raised in the transaction of every write to the
system's measured data — a readings upload, an irradiance upload or import, retention
removing old readings — so a value derived from one system's data (the performance body) is
kept until that system's data changes, not until any commit anywhere (issue 30).

Revision ID: 0017_system_data_version
Revises: 0016_readings_partitions
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_system_data_version"
down_revision = "0016_readings_partitions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.add_column(
            sa.Column("data_version", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.drop_column("data_version")
