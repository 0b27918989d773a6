"""The auth epoch (issue 34): callers' Principals kept until a key or an account changes,
not until any commit.

Revision ID: 0020_auth_epoch
Revises: 0019_readings_without_fk
Create Date: 2026-11-26

The gateway kept each caller's Principal under `db.committed_version`, which every commit of
any process changes, so with loggers uploading all day every request read its key again
(on PostgreSQL authentication went from 4 % to 15 % of an uncached read's time under ~200
commits/s). `auth_epoch` is one row whose `epoch` grows in the same transaction as every
change to what a Principal is made of, by triggers, so no write path can forget to:

- `api_keys`: a row inserted or deleted, or any column but `last_used_at` changed (that one
  is written once a minute per key in use and says nothing a kept Principal needs: a kept
  one with an old value is read again when it is due, `auth.service.needs_touch`);
- `accounts`: a row inserted or deleted, or any column changed (an account deleted takes its
  keys with it, which fire their own).

An UPDATE that changes nothing it watches (the same value written) leaves it. On PostgreSQL the
triggers are deferred constraint triggers: the epoch's row is locked at the commit, after
every other row the transaction wrote, so two transactions that change keys cannot deadlock on
it, and they hold it only for their commit. A sequence would not do: `nextval` is not undone
by a rollback and is seen before the commit. The epoch starts at the time of the upgrade in
microseconds, so a database migrated down and up again never repeats an earlier value.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_auth_epoch"
down_revision = "0019_readings_without_fk"
branch_labels = None
depends_on = None

# The columns whose change changes a Principal, or may (all but `api_keys.last_used_at`).
WATCHED = {
    "api_keys": (
        "id", "account_id", "name", "environment", "key_hash", "display", "created_at",
        "revoked_at",
    ),
    "accounts": ("id", "name", "plan", "created_at", "sandbox_provisioned_at", "disabled_at"),
}  # fmt: skip

_BUMP = "UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1"

_PG_FUNCTION = f"""
CREATE FUNCTION bump_auth_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_BUMP};
    RETURN NULL;
END $$
"""


def _changed(table: str, distinct: str) -> str:
    return " OR ".join(f"OLD.{column} {distinct} NEW.{column}" for column in WATCHED[table])


def upgrade() -> None:
    op.create_table(
        "auth_epoch",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_auth_epoch_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_epoch")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "INSERT INTO auth_epoch (id, epoch)"
            " VALUES (1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)"
        )
        op.execute(_PG_FUNCTION)
        for table, columns in WATCHED.items():
            op.execute(
                f"CREATE CONSTRAINT TRIGGER auth_epoch_{table}_rows"
                f" AFTER INSERT OR DELETE ON {table} DEFERRABLE INITIALLY DEFERRED"
                " FOR EACH ROW EXECUTE FUNCTION bump_auth_epoch()"
            )
            op.execute(
                f"CREATE CONSTRAINT TRIGGER auth_epoch_{table}_update"
                f" AFTER UPDATE OF {', '.join(columns)} ON {table}"
                " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
                f" WHEN ({_changed(table, 'IS DISTINCT FROM')})"
                " EXECUTE FUNCTION bump_auth_epoch()"
            )
    else:
        op.execute(
            "INSERT INTO auth_epoch (id, epoch)"
            " VALUES (1, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))"
        )
        for table, columns in WATCHED.items():
            for event in ("INSERT", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER auth_epoch_{table}_{event.lower()} AFTER {event} ON {table}"
                    f" BEGIN {_BUMP}; END"
                )
            op.execute(
                f"CREATE TRIGGER auth_epoch_{table}_update"
                f" AFTER UPDATE OF {', '.join(columns)} ON {table} FOR EACH ROW"
                f" WHEN {_changed(table, 'IS NOT')} BEGIN {_BUMP}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in WATCHED:
            op.execute(f"DROP TRIGGER auth_epoch_{table}_rows ON {table}")
            op.execute(f"DROP TRIGGER auth_epoch_{table}_update ON {table}")
        op.execute("DROP FUNCTION bump_auth_epoch()")
    else:
        for table in WATCHED:
            for event in ("insert", "delete", "update"):
                op.execute(f"DROP TRIGGER auth_epoch_{table}_{event}")
    op.drop_table("auth_epoch")
