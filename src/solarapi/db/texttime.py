"""`api_time(column)`: a timestamp column as the API writes it (`2025-06-15T12:00:00Z`: UTC,
whole seconds), formatted by the database in the statement that reads it — compiled per
database, so no repository branches on the dialect. For lists that show many timestamps and
never compute with them: no datetime object is made or formatted per value.

PostgreSQL: `to_char` of the `timestamptz` in UTC. SQLite: `strftime` of the stored text
(UTC, as `models.base.UtcDateTime` writes it). Both truncate fractions of a second, as
`kit.timefmt.format_timestamp` does.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class api_time(FunctionElement[str]):
    type = String()
    inherit_cache = True
    name = "api_time"


@compiles(api_time)
def _sqlite(element: api_time, compiler: Any, **kw: Any) -> str:
    return f"strftime('%Y-%m-%dT%H:%M:%SZ', {compiler.process(element.clauses, **kw)})"


@compiles(api_time, "postgresql")
def _postgresql(element: api_time, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"""
