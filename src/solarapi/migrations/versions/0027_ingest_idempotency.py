"""`Idempotency-Key` on `POST /ingest/readings`: an idempotency record belongs to an API key
or to an ingest token (`ingest_token_id`), never both.

Revision ID: 0027_ingest_idempotency
Revises: 0026_system_counts
Create Date: 2026-11-28

Every POST accepts `Idempotency-Key`, scoped to the credential that sends it. A data logger's
upload is authenticated by its system's ingest token, not an API key, so its keys had no
owner and were ignored: a logger that retried an upload whose answer it lost was answered
`inserted: 0, updated: 4` and raised a second `readings.uploaded`. Its keys are now the
token's: deleting the token (with its system) deletes them, as deleting an API key deletes
its own. The table holds at most a day of keys, so rebuilding it (SQLite) is short.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_ingest_idempotency"
down_revision = "0026_system_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.alter_column("api_key_id", existing_type=sa.String(40), nullable=True)
        batch.add_column(sa.Column("ingest_token_id", sa.String(40), nullable=True))
        batch.create_foreign_key(
            op.f("fk_idempotency_keys_ingest_token_id_ingest_tokens"),
            "ingest_tokens",
            ["ingest_token_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch.create_unique_constraint(
            op.f("uq_idempotency_keys_ingest_token_id_idempotency_key"),
            ["ingest_token_id", "idempotency_key"],
        )
        batch.create_check_constraint(
            op.f("ck_idempotency_keys_one_holder"),
            "(api_key_id IS NULL) <> (ingest_token_id IS NULL)",
        )


def downgrade() -> None:
    # A token's keys have no API key to belong to: they go (they answer repeats for a day).
    op.execute("DELETE FROM idempotency_keys WHERE api_key_id IS NULL")
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_constraint(op.f("ck_idempotency_keys_one_holder"), type_="check")
        batch.drop_constraint(
            op.f("uq_idempotency_keys_ingest_token_id_idempotency_key"), type_="unique"
        )
        batch.drop_constraint(
            op.f("fk_idempotency_keys_ingest_token_id_ingest_tokens"), type_="foreignkey"
        )
        batch.drop_column("ingest_token_id")
        batch.alter_column("api_key_id", existing_type=sa.String(40), nullable=False)
