"""The systems of an environment counted per status and zone (issue 34): `system_counts`.

Revision ID: 0026_system_counts
Revises: 0025_reading_chunks
Create Date: 2026-11-27

`GET /systems` says how many systems match (`pagination.total`) on every page. It counted
them on every page: on PostgreSQL a sequential scan of `systems` (0.10 ms of PostgreSQL's
CPU on each page of a 1,000-system account, bench/fleet/dbcpu.py; an index-only scan
fetches every row anyway, since every upload updates its system's row and the visibility map
is seldom all-visible), on SQLite a scan of the account's index entries: a cost that grows
with the fleet, paid again for each of its pages. The total is now the sum of at most a few
rows of `system_counts` (one per status and zone the environment has).

Kept by triggers on `systems`, in the statement that writes: a system inserted, deleted (by
the API, or with its account), or moved to another status or zone. An UPDATE that names
none of the key's columns fires nothing (an upload's of the reading span and
`data_version`), and one that names them without changing them writes nothing. On
PostgreSQL a move locks its two rows in key order: two transactions moving systems between
the same two keys in opposite directions would otherwise each hold one row and wait for the
other's.

The triggers are made before the existing systems are counted: on PostgreSQL making a trigger
locks `systems` against writes until this migration commits, so no system can be written
between the count and the trigger.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_system_counts"
down_revision = "0025_reading_chunks"
branch_labels = None
depends_on = None

_KEY = "account_id, environment, status, market_zone"
_COUNT = (
    f"INSERT INTO system_counts ({_KEY}, systems) SELECT account_id, environment, status,"  # noqa: S608 - constants
    " coalesce(market_zone, ''), count(*) FROM systems"
    " GROUP BY account_id, environment, status, coalesce(market_zone, '')"
)

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION count_systems() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    gone text[];
    came text[];
BEGIN
    IF TG_OP <> 'INSERT' THEN
        gone := ARRAY[OLD.account_id, OLD.environment, OLD.status, coalesce(OLD.market_zone, '')];
    END IF;
    IF TG_OP <> 'DELETE' THEN
        came := ARRAY[NEW.account_id, NEW.environment, NEW.status, coalesce(NEW.market_zone, '')];
    END IF;
    IF gone = came THEN
        RETURN NULL;
    END IF;
    -- Rows locked in key order (see the migration's text): the new key first if it sorts first.
    IF came IS NOT NULL AND (gone IS NULL OR came < gone) THEN
        INSERT INTO system_counts ({_KEY}, systems) VALUES (came[1], came[2], came[3], came[4], 1)
            ON CONFLICT ({_KEY}) DO UPDATE SET systems = system_counts.systems + 1;
        came := NULL;
    END IF;
    IF gone IS NOT NULL THEN
        DELETE FROM system_counts WHERE account_id = gone[1] AND environment = gone[2]
            AND status = gone[3] AND market_zone = gone[4] AND systems = 1;
        IF NOT FOUND THEN
            UPDATE system_counts SET systems = systems - 1 WHERE account_id = gone[1]
                AND environment = gone[2] AND status = gone[3] AND market_zone = gone[4];
        END IF;
    END IF;
    IF came IS NOT NULL THEN
        INSERT INTO system_counts ({_KEY}, systems) VALUES (came[1], came[2], came[3], came[4], 1)
            ON CONFLICT ({_KEY}) DO UPDATE SET systems = system_counts.systems + 1;
    END IF;
    RETURN NULL;
END $$
"""  # noqa: S608 - constants
_PG_TRIGGER = (
    "CREATE TRIGGER count_systems AFTER INSERT OR DELETE OR UPDATE OF"
    f" {_KEY} ON systems FOR EACH ROW EXECUTE FUNCTION count_systems()"
)


def _sqlite_came(row: str) -> str:
    return (
        f"INSERT INTO system_counts ({_KEY}, systems) VALUES ({row}.account_id,"  # noqa: S608 - constants
        f" {row}.environment, {row}.status, coalesce({row}.market_zone, ''), 1)"
        f" ON CONFLICT ({_KEY}) DO UPDATE SET systems = systems + 1;"
    )


def _sqlite_gone(row: str) -> str:
    key = (
        f"account_id = {row}.account_id AND environment = {row}.environment AND status ="
        f" {row}.status AND market_zone = coalesce({row}.market_zone, '')"
    )
    return (
        f"DELETE FROM system_counts WHERE {key} AND systems = 1;"  # noqa: S608 - constants
        f" UPDATE system_counts SET systems = systems - 1 WHERE {key};"
    )


_SQLITE_TRIGGERS = {
    "count_systems_insert": f"AFTER INSERT ON systems BEGIN {_sqlite_came('NEW')} END",
    "count_systems_delete": f"AFTER DELETE ON systems BEGIN {_sqlite_gone('OLD')} END",
    "count_systems_update": (
        f"AFTER UPDATE OF {_KEY} ON systems WHEN OLD.account_id IS NOT NEW.account_id"
        " OR OLD.environment IS NOT NEW.environment OR OLD.status IS NOT NEW.status"
        " OR OLD.market_zone IS NOT NEW.market_zone"
        f" BEGIN {_sqlite_gone('OLD')} {_sqlite_came('NEW')} END"
    ),
}


def upgrade() -> None:
    op.create_table(
        "system_counts",
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("environment", sa.String(4), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("market_zone", sa.String(16), nullable=False),
        sa.Column("systems", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "account_id", "environment", "status", "market_zone", name="pk_system_counts"
        ),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(_PG_TRIGGER)
    else:
        for name, body in _SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {body}")
    op.execute(_COUNT)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER count_systems ON systems")
        op.execute("DROP FUNCTION count_systems()")
    else:
        for name in _SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("system_counts")
