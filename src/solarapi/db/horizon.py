"""`snapshot_horizon()`: a SQL expression for the change feed (docs/changes.md), compiled per
database so that no repository branches on the dialect.

PostgreSQL: the xmin of the statement's own snapshot, `pg_snapshot_xmin(pg_current_snapshot())`
— every transaction below it has ended, every one still running or still to come is at or
above it. SQLite: NULL (no horizon): its writers are serialised, so the rows a reader sees
were committed in the order they were written.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class snapshot_horizon(FunctionElement[int]):
    type = BigInteger()
    inherit_cache = True
    name = "snapshot_horizon"


@compiles(snapshot_horizon)
def _no_horizon(element: snapshot_horizon, compiler: Any, **kw: Any) -> str:
    return "NULL"


@compiles(snapshot_horizon, "postgresql")
def _xmin(element: snapshot_horizon, compiler: Any, **kw: Any) -> str:
    return "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
