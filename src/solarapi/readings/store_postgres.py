"""The PostgreSQL `ReadingStore`: a range comes back as one `bytea` that numpy reads as a
record array (no Python object per value), the system and its range in one statement, bulk
writes as one `INSERT … SELECT FROM unnest(…)` per chunk.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import (
    ColumnElement,
    FromClause,
    LargeBinary,
    Select,
    bindparam,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery, fetch_rows
from solarapi.kit.grid import IntArray
from solarapi.models.systems import System, SystemRecord
from solarapi.readings.store import (
    NUMPY_TYPES,
    ChangeOwner,
    Rows,
    Series,
    Upsert,
    in_owner_order,
    in_time_order,
)
from solarapi.systems.repository import SYSTEM_COLUMNS, record

_CHUNK = 10_000
_BINARY = {"int8": ">i8", "int4": ">i4", "float8": ">f8"}


class _Packed:
    """The statements of one series: its rows of a range as one `bytea`, each row packed by
    its columns' binary send functions (NULL floats as NaN, which they become in the arrays
    anyway). Building a tuple per row, and arrays from those, cost several times the query
    on a year of quarter-hours.

    Aggregated over a subquery ordered by the time key (an index scan in that order), not
    with `string_agg(… ORDER BY key)`: PostgreSQL 15 sorts an ordered aggregate's input
    whatever order it arrives in — 50 instead of 14 ms for a year of quarter-hours. SQL does
    not promise the aggregate keeps the subquery's order, so `unpack` checks it."""

    def __init__(self, series: Series) -> None:
        self.series = series
        # One row as PostgreSQL's binary send functions write it: big-endian, unpadded.
        self.record = np.dtype([(name, _BINARY[kind]) for name, kind in series.columns])
        self.range = DriverQuery(self._packed(bindparam("id")))
        systems = System.__table__
        rows = self._packed(systems.c.id, outer=systems).scalar_subquery()
        # No row at all when the system does not exist.
        self.system_and_range = DriverQuery(
            select(*SYSTEM_COLUMNS, rows).where(systems.c.id == bindparam("id"))
        )

    def _packed(
        self, system_id: ColumnElement[Any], outer: FromClause | None = None
    ) -> Select[tuple[bytes]]:
        table = self.series.model.__table__
        key = table.c[self.series.key]
        ordered = select(*(table.c[name] for name, _ in self.series.columns)).where(
            table.c.system_id == system_id, key >= bindparam("start"), key < bindparam("end")
        )
        if outer is not None:  # the enclosing query's table `system_id` belongs to
            ordered = ordered.correlate(outer)
        ordered_rows = ordered.order_by(key).subquery("r")
        fields = []
        for name, kind in self.series.columns:
            column: ColumnElement[Any] = ordered_rows.c[name]
            if kind == "float8":
                column = func.coalesce(column, literal_column("'NaN'::float8"))
            fields.append(getattr(func, f"{kind}send")(column))
        row = functools.reduce(lambda left, right: left.op("||")(right), fields)
        return select(func.string_agg(row, literal_column("''::bytea"), type_=LargeBinary()))

    @functools.cached_property
    def many_sql(self) -> str:
        """The rows of many systems (`$1`, a text[]) in [`$2`, `$3`), each prefixed with its
        system's place in `$1` (from 0), as one `bytea`: a lateral index scan per system, in
        the array's order and each system's time order (`unpack_many` checks it)."""
        fields = ["int4send((s.n - 1)::int4)"]
        for name, kind in self.series.columns:
            value = f"coalesce(r.{name}, 'NaN'::float8)" if kind == "float8" else f"r.{name}"
            fields.append(f"{kind}send({value})")
        names = ", ".join(name for name, _ in self.series.columns)
        key = self.series.key
        return (
            f"SELECT string_agg({' || '.join(fields)}, ''::bytea) "  # noqa: S608 - constants
            "FROM unnest($1::text[]) WITH ORDINALITY AS s(id, n) CROSS JOIN LATERAL "
            f"(SELECT {names} FROM {self.series.name} WHERE system_id = s.id "
            f"AND {key} >= $2 AND {key} < $3 ORDER BY {key}) AS r"
        )

    def unpack_many(self, blob: bytes | None) -> tuple[IntArray, Rows]:
        record = np.dtype([("owner", ">i4"), *self.record.descr])
        records = np.frombuffer(b"" if blob is None else blob, dtype=record)
        columns = self.series.columns
        owners, arrays = in_owner_order(
            records["owner"].astype(np.int64),
            [records[name].astype(NUMPY_TYPES[kind]) for name, kind in columns],
        )
        return owners, self.series.rows(arrays)

    def unpack(self, blob: bytes | None) -> Rows:
        records = np.frombuffer(b"" if blob is None else blob, dtype=self.record)
        columns = self.series.columns
        return self.series.rows(
            in_time_order([records[name].astype(NUMPY_TYPES[kind]) for name, kind in columns])
        )


@functools.cache
def _packed(series: Series) -> _Packed:
    return _Packed(series)


class PostgresReadingStore:
    async def rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> Rows:
        packed = _packed(series)
        row = await packed.range.first(session, {"id": system_id, "start": start_s, "end": end_s})
        assert row is not None  # an aggregate: always one row
        return packed.unpack(row[0])

    async def system_and_rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> tuple[SystemRecord | None, Rows]:
        # One statement: one round trip instead of two, each of which costs this process
        # ~0.2 ms of CPU inside a request.
        packed = _packed(series)
        row = await packed.system_and_range.first(
            session, {"id": system_id, "start": start_s, "end": end_s}
        )
        if row is None:
            return None, series.empty()
        return record(row[:-1]), packed.unpack(row[-1])

    async def rows_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, Rows]:
        packed = _packed(series)
        rows = await fetch_rows(session, packed.many_sql, [list(system_ids), start_s, end_s])
        return packed.unpack_many(rows[0][0])

    async def upsert(
        self, session: AsyncSession, upsert: Upsert, system_id: str, values: list[list[Any]]
    ) -> None:
        names = ", ".join(upsert.columns)
        arrays = ", ".join(f"CAST(:c{i} AS {kind}[])" for i, kind in enumerate(upsert.pg_types))
        statement = text(
            f"INSERT INTO {upsert.table} (system_id, {names}) "  # noqa: S608 - constants
            f"SELECT :system_id, * FROM unnest({arrays}) {upsert.conflict_clause()}"
        )
        for lo in range(0, len(values[0]), _CHUNK):
            params: dict[str, Any] = {"system_id": system_id}
            for i, column in enumerate(values):
                params[f"c{i}"] = column[lo : lo + _CHUNK]
            await session.execute(statement, params)

    async def log_changes(
        self, session: AsyncSession, change: ChangeOwner, values: list[list[Any]]
    ) -> None:
        # A replaced reading's row moves to a new position: a new `seq` and this
        # transaction's id (the feed reads below its snapshot's xmin, docs/changes.md).
        for lo in range(0, len(values[0]), _CHUNK):
            await session.execute(
                _LOG_CHANGES,
                {
                    "system_id": change.system_id,
                    "account_id": change.account_id,
                    "environment": change.environment,
                    "starts": values[0][lo : lo + _CHUNK],
                    "energy": values[1][lo : lo + _CHUNK],
                    "power": values[2][lo : lo + _CHUNK],
                },
            )


_LOG_CHANGES = text(
    "INSERT INTO reading_changes "
    "(system_id, start_s, account_id, environment, txid, energy_wh, power_w) "
    "SELECT :system_id, u.s, :account_id, :environment, pg_current_xact_id()::text::bigint, "
    "u.e, u.p FROM unnest(CAST(:starts AS bigint[]), CAST(:energy AS double precision[]), "
    "CAST(:power AS double precision[])) AS u(s, e, p) "
    "ON CONFLICT (system_id, start_s) DO UPDATE SET "
    "seq = nextval(pg_get_serial_sequence('reading_changes', 'seq')), txid = excluded.txid, "
    "energy_wh = excluded.energy_wh, power_w = excluded.power_w"
)
