"""The PostgreSQL `ReadingStore`: a range comes back as one `bytea` that numpy reads as a
record array (no Python object per value), the system and its range in one statement, bulk
writes as one `INSERT … SELECT FROM unnest(…)` per chunk.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt
import orjson
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

from solarapi.db import DriverQuery, driver_connection, fetch_rows, pg_reader
from solarapi.kit.grid import EnergySeries, IntArray
from solarapi.models.systems import System
from solarapi.readings.store import (
    NUMPY_TYPES,
    ChangeOwner,
    NewBatch,
    Series,
    Upsert,
    in_owner_order,
    in_time_order,
    month_spans,
)
from solarapi.systems.repository import SystemHead

_CHUNK = 10_000


def _nullable(values: Any) -> list[float | None]:
    return [None if value != value else value for value in values.tolist()]


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
            select(*_HEAD_COLUMNS, rows).where(systems.c.id == bindparam("id"))
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
        """The rows of many systems (`$1`, their ids as a JSON array) in [`$2`, `$3`), each
        prefixed with its system's place in `$1` (from 0), as one `bytea`: a lateral index
        scan per system, in the array's order and each system's time order (`unpack_many`
        checks it). The ids go as one JSON text, not a `text[]`: asyncpg encodes an array
        element by element (~4,400 instructions an id, 3 % of a portfolio request)."""
        fields = ["int4send((s.n - 1)::int4)"]
        for name, kind in self.series.columns:
            value = f"coalesce(r.{name}, 'NaN'::float8)" if kind == "float8" else f"r.{name}"
            fields.append(f"{kind}send({value})")
        names = ", ".join(name for name, _ in self.series.columns)
        key = self.series.key
        return (
            f"SELECT string_agg({' || '.join(fields)}, ''::bytea) "  # noqa: S608 - constants
            "FROM json_array_elements_text($1::text::json) WITH ORDINALITY AS s(id, n) "
            "CROSS JOIN LATERAL "
            f"(SELECT {names} FROM {self.series.name} WHERE system_id = s.id "
            f"AND {key} >= $2 AND {key} < $3 ORDER BY {key}) AS r"
        )

    def unpack_many(self, blob: bytes | None) -> tuple[IntArray, EnergySeries]:
        record = np.dtype([("owner", ">i4"), *self.record.descr])
        records = np.frombuffer(b"" if blob is None else blob, dtype=record)
        columns = self.series.columns
        owners, arrays = in_owner_order(
            records["owner"].astype(np.int64),
            [records[name].astype(NUMPY_TYPES[kind]) for name, kind in columns],
        )
        return owners, self.series.rows(arrays)

    def unpack(self, blob: bytes | None) -> EnergySeries:
        records = np.frombuffer(b"" if blob is None else blob, dtype=self.record)
        columns = self.series.columns
        return self.series.rows(
            in_time_order([records[name].astype(NUMPY_TYPES[kind]) for name, kind in columns])
        )


@functools.cache
def _packed(series: Series) -> _Packed:
    return _Packed(series)


# `SystemHead`'s columns, in its order.
_HEAD_COLUMNS = tuple(System.__table__.c[name] for name in SystemHead._fields)
_HEAD = DriverQuery(select(*_HEAD_COLUMNS).where(System.__table__.c.id == bindparam("id")))


class PostgresReadingStore:
    stores_new_batches = True

    async def rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> EnergySeries:
        packed = _packed(series)
        row = await packed.range.first(session, {"id": system_id, "start": start_s, "end": end_s})
        assert row is not None  # an aggregate: always one row
        return packed.unpack(row[0])

    async def system_and_rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> tuple[SystemHead | None, EnergySeries]:
        # One statement: one round trip instead of two, each of which costs this process
        # ~0.2 ms of CPU inside a request. As the driver gives them (text and bytea: no
        # column needs converting).
        packed = _packed(series)
        rows = await packed.system_and_range.raw(
            session, {"id": system_id, "start": start_s, "end": end_s}
        )
        if not rows:
            return None, series.empty()
        row = rows[0]
        return SystemHead(row[0], row[1], row[2], row[3], row[4]), packed.unpack(row[5])

    async def system_head(self, session: AsyncSession, system_id: str) -> SystemHead | None:
        rows = await _HEAD.raw(session, {"id": system_id})
        return SystemHead._make(rows[0]) if rows else None

    async def rows_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, EnergySeries]:
        packed = _packed(series)
        ids = orjson.dumps(list(system_ids)).decode()
        rows = await fetch_rows(session, packed.many_sql, [ids, start_s, end_s])
        return packed.unpack_many(rows[0][0])

    async def upsert(
        self, session: AsyncSession, upsert: Upsert, system_id: str, values: list[list[Any]]
    ) -> None:
        if upsert.updates == "" and len(values[0]) >= _COPY_FROM:
            # Rows the caller knows are new (under the system's lock): COPY, binary.
            await _copy(session, upsert.table, ("system_id", *upsert.columns),
                        zip(itertools.repeat(system_id), *values, strict=False))  # fmt: skip
            return
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

    async def store_new(
        self, session: AsyncSession, batch: NewBatch
    ) -> tuple[datetime, datetime] | None:
        if session.in_transaction():
            # Inside a transaction a failed statement would abort it: the general way.
            return None
        event, job = batch.event, batch.alert_job
        copied = len(batch.starts) >= _COPY_FROM
        rows = ([], [], []) if copied else (
            batch.starts.tolist(), batch.energy_wh.tolist(), _nullable(batch.power_w)
        )  # fmt: skip
        # A large batch after the system's last reading: only its first hour and first local
        # day can have a rollup row already (the last stored reading's); the statement adds
        # those, the rest are new rows and go by COPY after it — half the database's time of
        # `ON CONFLICT DO UPDATE` per row, and 10,000 fewer Python values to encode
        # (bench/readings/README.md). Correctness does not rest on it: a row already there
        # fails the COPY, the transaction with it, and the upload takes the general way.
        added = 1 if copied and batch.after_last_reading else None
        hours, days = batch.hours, batch.days
        params = (
            batch.system_id, batch.account_id, batch.environment, batch.timezone,
            batch.capacity_kwp, *rows, int(batch.starts.min()), int(batch.starts.max()),
            hours.starts[:added].tolist(), hours.energy_wh[:added].tolist(),
            hours.samples[:added].tolist(), _nullable(hours.power_max_w[:added]),
            days.starts[:added].tolist(), days.energy_wh[:added].tolist(),
            days.samples[:added].tolist(), _nullable(days.power_max_w[:added]),
            batch.first, batch.last,
            event.id, event.type, event.data, event.created_at, list(event.delivery_ids),
            event.delivery_kind, event.delivery_max_attempts,
            job.id, job.kind, job.payload, job.max_attempts, job.run_at, job.account_id,
            *month_spans(batch.starts),
        )  # fmt: skip
        try:
            # Before any transaction of the session: a connection of its own, committed
            # when it returns, all of it or nothing.
            async with pg_reader(session) as connection:
                statement = _STORE_NEW[copied, batch.after_last_reading]
                if not copied:  # one statement, its own transaction
                    span = await connection.fetchrow(statement, *params)
                    return None if span is None else (span[0], span[1])
                async with connection.transaction():
                    span = await connection.fetchrow(statement, *params)
                    if span is None:
                        return None  # nothing was written: rolled back on the way out
                    # The rows by binary COPY, built by numpy: a tenth of the CPU of
                    # encoding 30,000 Python values, and no per-row planning; each with
                    # the statement's change batch (`span[2]`, its `seq`).
                    await connection.copy_to_table(
                        "readings", columns=[
                            "system_id", "start_s", "energy_wh", "power_w", "batch"
                        ], source=binary_copy(len(batch.starts), [
                            batch.system_id.encode(), batch.starts, batch.energy_wh,
                            batch.power_w, int(span[2]),
                        ]), format="binary",
                    )  # fmt: skip
                    if added is not None:
                        await _copy_rollup(
                            connection, "reading_hours", "hour_s", batch.system_id, hours, added
                        )
                        await _copy_rollup(
                            connection, "reading_days", "day_start_s", batch.system_id, days, added
                        )
        except asyncpg.UniqueViolationError:
            # A quarter-hour committed by another upload after this statement's snapshot
            # and before it had the system's lock: nothing was written.
            return None
        return span[0], span[1]

    async def open_batch(self, session: AsyncSession, change: ChangeOwner, starts: IntArray) -> int:
        # A new `seq`, one batch row per month touched, this transaction's id (the feed
        # reads below its snapshot's xmin, docs/changes.md).
        los, his = month_spans(starts)
        result = await session.execute(
            _OPEN_BATCH,
            {
                "account_id": change.account_id,
                "environment": change.environment,
                "system_id": change.system_id,
                "los": los,
                "his": his,
            },
        )
        return int(result.scalar_one())


# From this many rows on, rows known to be new are written by COPY (binary) instead of one
# INSERT … SELECT FROM unnest(…) (bench/readings/upload_cpu.py bulk).
_COPY_FROM = 500
_OPEN_BATCH = text(
    "WITH s AS (SELECT nextval('change_batches_seq_seq') AS seq), b AS ("
    "INSERT INTO change_batches (seq, account_id, environment, txid, system_id, lo_s, hi_s) "
    "SELECT s.seq, :account_id, :environment, pg_current_xact_id()::text::bigint, :system_id, "
    "m.lo, m.hi FROM s, unnest(CAST(:los AS bigint[]), CAST(:his AS bigint[])) AS m(lo, hi)"
    ") SELECT seq FROM s"
)


async def _copy(
    session: AsyncSession, table: str, columns: tuple[str, ...], records: Iterable[tuple[Any, ...]]
) -> None:
    """COPY `records` into `table` in the session's transaction (asyncpg, binary format)."""
    connection = await driver_connection(session)
    await connection.copy_records_to_table(table, records=records, columns=list(columns))


async def _copy_rollup(
    connection: asyncpg.Connection,
    table: str,
    key: str,
    system_id: str,
    sums: EnergySeries,
    first: int,
) -> None:
    """The rollup rows `sums[first:]` into `table` by binary COPY, as a plain INSERT would
    write them (sent only if there are any)."""
    if len(sums.starts) > first:
        await connection.copy_to_table(
            table, columns=["system_id", key, "energy_wh", "samples", "power_max_w"],
            source=binary_copy(len(sums.starts) - first, [
                system_id.encode(), sums.starts[first:], sums.energy_wh[first:],
                sums.samples[first:].astype(np.int32), sums.power_max_w[first:],
            ]), format="binary",
        )  # fmt: skip


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
_COPY_TRAILER = b"\xff\xff"


def binary_copy(count: int, columns: Sequence[bytes | int | npt.NDArray[Any]]) -> memoryview:
    """`count` rows in PostgreSQL's binary COPY format, built column by column with numpy
    (no Python object per value): a column is one value for every row (`bytes`: text, `int`:
    int8) or an array (int64: int8; int32: int4; float64: float8, NaN written as NULL). A
    memoryview: asyncpg takes `bytes` for a file's path."""
    fields: list[tuple[str, str]] = [("n", ">i2")]
    for i, column in enumerate(columns):
        kind = (
            f"S{len(column)}" if isinstance(column, bytes)
            else ">i8" if isinstance(column, int)
            else f">i{column.dtype.itemsize}" if column.dtype.kind in "iu" else ">f8"
        )  # fmt: skip
        fields += [(f"l{i}", ">i4"), (f"v{i}", kind)]
    record = np.dtype(fields)
    rows = np.empty(count, dtype=record)
    rows["n"] = len(columns)
    nulls: list[tuple[int, npt.NDArray[np.bool_]]] = []
    for i, column in enumerate(columns):
        rows[f"l{i}"] = np.dtype(fields[2 + 2 * i][1]).itemsize
        rows[f"v{i}"] = column
        if not isinstance(column, bytes | int) and column.dtype.kind == "f":
            missing = np.isnan(column)
            if missing.any():
                rows[f"l{i}"][missing] = -1
                offsets = record.fields
                assert offsets is not None  # a structured dtype
                nulls.append((offsets[f"v{i}"][1], missing))
    body = rows.view(np.uint8).reshape(count, record.itemsize)
    if nulls:
        # A NULL is its length (-1) alone: drop its value's 8 bytes from those rows.
        keep = np.ones(body.shape, dtype=bool)
        for offset, missing in nulls:
            keep[missing, offset : offset + 8] = False
        payload = body[keep].tobytes()
    else:
        payload = body.tobytes()
    return memoryview(_COPY_HEADER + payload + _COPY_TRAILER)


# Adding rollup sums to a stored row: sums add up, the maximum ignores missing powers.
def _additive(table: str) -> str:
    return (
        f"energy_wh = {table}.energy_wh + excluded.energy_wh, "
        f"samples = {table}.samples + excluded.samples, "
        f"power_max_w = CASE WHEN excluded.power_max_w IS NULL THEN {table}.power_max_w "
        f"WHEN {table}.power_max_w IS NULL OR excluded.power_max_w > {table}.power_max_w "
        f"THEN excluded.power_max_w ELSE {table}.power_max_w END"
    )


# A batch of new quarter-hours and everything its upload writes, in one statement (one round
# trip, one transaction: the twelve of the general way cost the API ~10 ms of CPU and
# PostgreSQL ~2.5 ms per small upload, bench/readings/README.md).
#
# - `present` (this statement's snapshot) and `hooks` are read first. `present` reads
#   `readings` by its primary key, and only in the variants for a batch that is not after the
#   system's last reading (a correction or a backfill, not the hourly upload): a statement
#   that scans a partitioned table is planned anew on every execution (~0.3–0.5 ms of
#   PostgreSQL's CPU), which the usual upload's variant, reading no table, is spared.
# - The UPDATE of the system's reading span takes the system's row lock — the lock every
#   writer of the system takes — and re-checks, on the row as it is once locked (READ COMMITTED re-evaluates an
#   updated row), that the time zone and capacity are those the batch was bucketed and
#   validated with. Every write after it selects FROM `sys`: no row, nothing written.
# - A quarter-hour committed by another upload after the snapshot but before the lock is
#   not in `present`; the plain INSERT then fails on the primary key and the whole statement
#   with it (the caller catches it and takes the general way).
# - The rollups are added to (exact: only new quarter-hours, the system locked; ON CONFLICT
#   updates the latest row version; a large batch after the last reading sends its first hour
#   and day alone, the rest go by COPY after it, `store_new`); the change feed's log gets one
#   batch (a new `seq`, a row per UTC month touched, $34/$35, with this transaction's id), as
#   `open_batch` writes it, and every reading carries its `seq` in `batch`.
_STORE_NEW_TEMPLATE = f"""
WITH present AS (
    SELECT count(*) AS n FROM readings
    WHERE system_id = $1 AND start_s >= $9 AND start_s <= $10{{present}}
), hooks AS (
    SELECT id, row_number() OVER (ORDER BY created_at, id) AS rn FROM webhook_endpoints
    WHERE account_id = $2 AND environment = $3 AND enabled AND (events::jsonb) ? $22
), sys AS (
    UPDATE systems SET
        data_version = data_version + 1,
        first_reading_at = CASE WHEN first_reading_at IS NULL OR first_reading_at > $19
            THEN $19 ELSE first_reading_at END,
        last_reading_at = CASE WHEN last_reading_at IS NULL OR last_reading_at < $20
            THEN $20 ELSE last_reading_at END
    WHERE id = $1 AND account_id = $2 AND environment = $3 AND timezone = $4
        AND capacity_kwp = $5 AND data_source = 'metered'
        AND {{absent}}
        AND (SELECT count(*) FROM hooks) <= cardinality($25::text[])
    RETURNING id, first_reading_at, last_reading_at
), seq AS (
    SELECT nextval('change_batches_seq_seq') AS seq FROM sys
), bat AS (
    INSERT INTO change_batches (seq, account_id, environment, txid, system_id, lo_s, hi_s)
    SELECT seq.seq, $2, $3, pg_current_xact_id()::text::bigint, $1, m.lo, m.hi
    FROM seq, unnest($34::int8[], $35::int8[]) AS m(lo, hi)
){{rows}}, hrs AS (
    INSERT INTO reading_hours (system_id, hour_s, energy_wh, samples, power_max_w)
    SELECT sys.id, h.* FROM sys,
        unnest($11::int8[], $12::float8[], $13::int4[], $14::float8[]) AS h
    ON CONFLICT (system_id, hour_s) DO UPDATE SET {_additive("reading_hours")}
), dys AS (
    INSERT INTO reading_days (system_id, day_start_s, energy_wh, samples, power_max_w)
    SELECT sys.id, d.* FROM sys,
        unnest($15::int8[], $16::float8[], $17::int4[], $18::float8[]) AS d
    ON CONFLICT (system_id, day_start_s) DO UPDATE SET {_additive("reading_days")}
), evt AS (
    INSERT INTO events (id, account_id, environment, type, data, created_at)
    SELECT $21, $2, $3, $22, $23::json, $24 FROM sys
), dlv AS (
    INSERT INTO jobs
        (id, kind, account_id, payload, status, attempts, max_attempts, run_at, created_at)
    SELECT ($25::text[])[hooks.rn], $26, $2,
        json_build_object('event_id', $21::text, 'endpoint_id', hooks.id, 'attempt', 1),
        'queued', 0, $27, $24, $24
    FROM sys, hooks
), alr AS (
    INSERT INTO jobs
        (id, kind, account_id, payload, status, attempts, max_attempts, run_at, created_at)
    SELECT $28, $29, $33, $30::json, 'queued', 0, $31, $32, $32 FROM sys
)
SELECT first_reading_at, last_reading_at, (SELECT seq FROM seq) FROM sys
"""  # noqa: S608 - table names and clauses are constants of this module
_ROWS = """, batch AS (
    SELECT * FROM unnest($6::int8[], $7::float8[], $8::float8[]) AS u(s, e, p)
), ins AS (
    INSERT INTO readings (system_id, start_s, energy_wh, power_w, batch)
    SELECT sys.id, batch.s, batch.e, batch.p, seq.seq FROM sys, batch, seq
)"""
# The statements by (rows by COPY after it, the batch after the system's last reading):
# - in the statement (a small batch) or by COPY after it (a large one; $6–$8 then sent empty
#   and typed in a CTE that is never run, so every variant takes the same parameters);
# - a batch after the system's last reading (the usual upload) is new whole when that still
#   holds under the lock: `readings` is not read (an unreferenced CTE is not even planned,
#   and a statement that reads the partitioned table is planned anew on every execution);
#   else none of its quarter-hours may be stored yet (the COPY: nothing of the system in the
#   batch's span, so it finds no conflict).
_AFTER_LAST = "(last_reading_at IS NULL OR last_reading_at < $19)"
_NONE_PRESENT = "(SELECT n FROM present) = 0"
_UNUSED_ROWS = ", unused AS (SELECT $6::int8[], $7::float8[], $8::float8[])"
_STORE_NEW = {
    (False, True): _STORE_NEW_TEMPLATE.format(present="", absent=_AFTER_LAST, rows=_ROWS),
    (False, False): _STORE_NEW_TEMPLATE.format(
        present=" AND start_s = ANY($6::int8[])", absent=_NONE_PRESENT, rows=_ROWS
    ),
    (True, True): _STORE_NEW_TEMPLATE.format(present="", absent=_AFTER_LAST, rows=_UNUSED_ROWS),
    (True, False): _STORE_NEW_TEMPLATE.format(present="", absent=_NONE_PRESENT, rows=_UNUSED_ROWS),
}
