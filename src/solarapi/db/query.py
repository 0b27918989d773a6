"""Reads straight through the driver, for the few reads every API request makes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db.engine import session_backend


async def fetch_rows(session: AsyncSession, sql: str, params: Sequence[Any]) -> Sequence[Any]:
    """Rows of a read through the driver (`sql` in its parameter style: `$1` for asyncpg,
    `?` for SQLite): asyncpg by `pg_reader`, SQLite by `sqlite_fetchall`."""
    return await session_backend(session).fetch_rows(session, sql, params)


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    # (column index, result processor) of the columns that have one.
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]


class DriverQuery:
    """A Core SELECT run straight through the driver on the session's connection: for the
    few reads every API request makes (its key, its system), and for long reads of numbers
    that go on into arrays (`raw`).

    SQLAlchemy's asyncio adapters cost per statement far more than the statement: measured
    here, a primary-key lookup takes 4 µs of CPU in SQLite, 73 µs as one `execute_fetchall`
    hand-over to aiosqlite's thread, and 363 µs through the adapter (four hand-overs:
    cursor, execute, fetch, close, plus the result machinery); on asyncpg 107 µs raw against
    190 µs, and the adapter's first statement of a transaction adds a BEGIN round trip. Here
    the statement is compiled once per dialect, runs as one hand-over (one round trip), and
    its columns are converted by their SQLAlchemy types as a result of the adapter would be
    (with the column type codes the backend's driver reports, which some processors need).

    Run before the session has begun a transaction it is a lone read (on PostgreSQL on a
    connection of its own, `pg_reader`; autocommit, as any single statement under READ
    COMMITTED); after, inside that transaction. Reads only.
    """

    def __init__(self, statement: Select[*tuple[Any, ...]]) -> None:
        self._statement = statement
        self._compiled: dict[str, _Compiled] = {}

    async def _compile(self, session: AsyncSession, dialect: Dialect) -> _Compiled:
        result = self._statement.compile(dialect=dialect)
        sql = str(result)
        columns = self._statement.selected_columns
        type_codes = await session_backend(session).result_type_codes(session, sql, len(columns))
        processors = (
            column.type.dialect_impl(dialect).result_processor(dialect, type_code)
            for column, type_code in zip(columns, type_codes, strict=True)
        )
        compiled = _Compiled(
            sql=sql,
            names=tuple(result.positiontup or ()),
            processors=tuple(
                (index, process) for index, process in enumerate(processors) if process is not None
            ),
        )
        self._compiled[dialect.name] = compiled
        return compiled

    async def _run(
        self, session: AsyncSession, params: Mapping[str, Any]
    ) -> tuple[_Compiled, Sequence[Any]]:
        dialect = session.get_bind().dialect
        compiled = self._compiled.get(dialect.name) or await self._compile(session, dialect)
        rows = await fetch_rows(session, compiled.sql, [params[name] for name in compiled.names])
        return compiled, rows

    async def raw(self, session: AsyncSession, params: Mapping[str, Any]) -> Sequence[Any]:
        """The rows as the driver gives them, no column converted: for reads of numbers only,
        which go on into numpy arrays."""
        return (await self._run(session, params))[1]

    async def all(self, session: AsyncSession, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        compiled, rows = await self._run(session, params)
        processors = compiled.processors
        if not processors:
            return [tuple(row) for row in rows]
        converted = []
        # Only the columns that have a processor are touched (a page of 50 systems has 1,300
        # values, a few hundred of them to convert).
        for row in rows:
            values = list(row)
            for index, process in processors:
                value = values[index]
                if value is not None:
                    values[index] = process(value)
            converted.append(tuple(values))
        return converted

    async def first(
        self, session: AsyncSession, params: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        rows = await self.all(session, params)
        return rows[0] if rows else None
