"""The SQLite `ReadingStore`: range reads through `db.sqlite_fetchall` (outside a write
transaction on the event loop's own `sqlite3` connection, where a read costs microseconds
instead of a hand-over to aiosqlite's thread), bulk writes as an `executemany` of one
prepared statement.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import driver_connection, sqlite_fetchall
from solarapi.kit.grid import EnergySeries, IntArray
from solarapi.readings.store import (
    DAYS,
    HOURS,
    NUMPY_TYPES,
    RAW,
    ChangeOwner,
    NewBatch,
    Series,
    Upsert,
    in_owner_order,
)
from solarapi.systems.repository import HEAD_COLUMNS, SystemHead


@functools.cache
def _range_sql(series: Series) -> str:
    names = ", ".join(name for name, _ in series.columns)
    return (
        f"SELECT {names} FROM {series.name} "  # noqa: S608 - constants of this package
        f"WHERE system_id = ? AND {series.key} >= ? AND {series.key} < ? ORDER BY {series.key}"
    )


# A row's owner, time key and (rollups) sample count in one integer: ((owner × 2**33 + key)
# × 2**10 + samples). Epoch seconds before the grid's end (2200) are below 2**33 and a rollup
# row counts at most a local day's quarter-hours (100), so all come back exact, as one value
# instead of three (each value the database hands over becomes a Python object first), for
# up to 2**20 systems per read.
_OWNER_SHIFT = 33
_SAMPLES_BITS = 10
MAX_OWNERS = 1 << (63 - _OWNER_SHIFT - _SAMPLES_BITS)


def _packs_samples(series: Series) -> bool:
    return any(name == "samples" for name, _ in series.columns)


@functools.cache
def _many_sql(series: Series) -> str:
    # CROSS JOIN: SQLite keeps the left table outside, so the rows come system by system in
    # the array's order, each system's by its primary key (`rows_of_many` checks it).
    key, *rest = (name for name, _ in series.columns)
    packed = f"((j.key << {_OWNER_SHIFT}) + r.{key})"
    if _packs_samples(series):
        # (NULL, which the conversion refuses, for a count that would not fit: never silent)
        packed = (
            f"CASE WHEN r.samples BETWEEN 0 AND {(1 << _SAMPLES_BITS) - 1} "
            f"THEN ({packed} << {_SAMPLES_BITS}) + r.samples END"
        )
    names = ", ".join(f"r.{name}" for name in rest if name != "samples")
    return (
        f"SELECT {packed}, {names} "  # noqa: S608 - constants
        f"FROM json_each(?) AS j CROSS JOIN {series.name} AS r WHERE r.system_id = j.value "
        f"AND r.{key} >= ? AND r.{key} < ?"
    )


@functools.cache
def _many_record(series: Series) -> np.dtype[Any]:
    """The rows of `_many_sql` as numpy reads them (NULL floats as NaN)."""
    return np.dtype(
        [("packed", np.int64)]
        + [(name, NUMPY_TYPES[kind]) for name, kind in series.columns[1:] if name != "samples"]
    )


def _columns(rows: list[Any], kinds: list[str]) -> list[npt.NDArray[Any]]:
    # One conversion of the whole table (NULL → NaN); epoch seconds and counts are exact
    # in float64 (< 2**53). fromiter over the flattened rows: half the time of np.array
    # over the row tuples.
    width = len(kinds)
    flat = np.fromiter(itertools.chain.from_iterable(rows), np.float64, len(rows) * width)
    matrix = flat.reshape(len(rows), width)
    return [matrix[:, i].astype(NUMPY_TYPES[kind], copy=False) for i, kind in enumerate(kinds)]


@dataclass(frozen=True, eq=False)
class Chunks:
    """A rollup kept packed on SQLite: `table` (system_id, chunk, `column`) holds each
    system's rows of `series` whose time key `>> shift` is `chunk`, as one blob of
    little-endian records (`record`: the series' columns in order, integers int64, floats
    float64, NaN for NULL) in time order. A range of a system's rows is then one or two
    values handed over by `sqlite3` instead of three Python objects per row.

    Exact by construction: triggers on the rollup (migrations 0022 and 0024) set `column` to
    NULL (stale) for every chunk a row is inserted into, updated in or deleted from, by any
    writer, and drop the chunk's row once it has no rows left; `upsert` packs the chunks it
    touched again in its transaction; a reader reads a system whose chunk in the range is
    stale from the rollup itself."""

    series: Series
    table: str
    column: str
    shift: int

    @functools.cached_property
    def record(self) -> np.dtype[Any]:
        return np.dtype(
            [(name, "<f8" if kind == "float8" else "<i8") for name, kind in self.series.columns]
        )

    @functools.cached_property
    def of_one(self) -> str:
        return (
            f"SELECT chunk, {self.column} FROM {self.table} "  # noqa: S608 - constants
            "WHERE system_id = ? AND chunk >= ? AND chunk <= ? ORDER BY chunk"
        )

    @functools.cached_property
    def with_head(self) -> str:
        # The system's head on every row (one to three: its chunks of the range, in order;
        # one with no chunk when it has none there). Its primary key's equality leaves one
        # system, so the chunks come in the key's order without a sort.
        head = ", ".join(f"s.{name}" for name in SystemHead._fields)
        return (
            f"SELECT {head}, c.chunk, c.{self.column} FROM systems AS s "  # noqa: S608
            f"LEFT JOIN {self.table} AS c "
            "ON c.system_id = s.id AND c.chunk >= ? AND c.chunk <= ? "
            "WHERE s.id = ? ORDER BY c.chunk"
        )

    @functools.cached_property
    def of_many(self) -> str:
        # CROSS JOIN: json_each stays the outer loop, so the chunks come system by system in
        # the array's order, each system's in chunk (= time) order (`in_owner_order` checks).
        return (
            f"SELECT j.key, c.{self.column} FROM json_each(?) AS j "  # noqa: S608 - constants
            f"CROSS JOIN {self.table} AS c "
            "WHERE c.system_id = j.value AND c.chunk >= ? AND c.chunk <= ?"
        )

    @functools.cached_property
    def pack(self) -> str:
        return (
            f"INSERT OR REPLACE INTO {self.table} "  # noqa: S608 - constants
            f"(system_id, chunk, {self.column}) VALUES (?, ?, ?)"
        )

    def span(self, start_s: int, end_s: int) -> tuple[int, int]:
        """The first and last chunk holding a row in [start_s, end_s) (end_s > start_s)."""
        return start_s >> self.shift, (end_s - 1) >> self.shift


# The local-day rollup per `day_start_s >> 22` (~48.5 days: a month of a system's days is one
# or two blobs; 1,552 bytes full) in `reading_day_chunks` (models.readings.ReadingDayChunk,
# migrations 0022 and 0023); the hourly rollup per `hour_s >> 17` (~36.4 hours: a day of a
# system's hours is one or two blobs; 1,184 bytes full) in `reading_hour_chunks`
# (models.readings.READING_HOUR_CHUNKS, migration 0024). Rowid tables both: a row of an
# index b-tree (WITHOUT ROWID) keeps at most ~1,000 bytes in its page (0023).
DAY_CHUNKS = Chunks(DAYS, "reading_day_chunks", "days", 22)
HOUR_CHUNKS = Chunks(HOURS, "reading_hour_chunks", "hours", 17)
# The raw quarter-hours per `start_s >> 16` (~18.2 hours: the last 24 hours at `15m` are two
# or three blobs; 1,752 bytes full) in `reading_chunks` (models.readings.READING_CHUNKS,
# migration 0025): a day of them was 96 rows, three Python objects each and a GIL hand-over
# per step, ~35 % of the whole uncached request's instructions (bench/fleet/README.md).
RAW_CHUNKS = Chunks(RAW, "reading_chunks", "quarters", 16)
CHUNKS = {DAYS: DAY_CHUNKS, HOURS: HOUR_CHUNKS, RAW: RAW_CHUNKS}
_CHUNKED_TABLES = {chunks.series.name: chunks for chunks in CHUNKS.values()}


def _within(
    records: npt.NDArray[Any], series: Series, start_s: int, end_s: int
) -> list[npt.NDArray[Any]]:
    """The columns of `series` of the packed `records` (in time order) whose time key lies
    in [start_s, end_s). (One transposed copy of the range through an int64 view instead
    of a copy per field: 15k instructions more per `1h` read, measured.)"""
    starts = records[series.key]
    # As a list: unpacking the array itself iterates it item by item to its IndexError.
    lo, hi = starts.searchsorted((start_s, end_s)).tolist()
    if lo or hi < len(records):
        records = records[lo:hi]
    return _fields(records, series)


def _unpacked(
    chunks: Chunks, blobs: list[bytes | None], start_s: int, end_s: int
) -> EnergySeries | None:
    """The rows in [start_s, end_s) of a system's chunks of the range (in chunk order), or
    None when one of them is stale."""
    if len(blobs) == 1:
        joined = blobs[0]
        if joined is None:
            return None
    elif any(blob is None for blob in blobs):
        return None
    else:
        joined = b"".join(blobs)  # type: ignore[arg-type]
    records = np.frombuffer(joined, chunks.record)
    return chunks.series.rows(_within(records, chunks.series, start_s, end_s))


async def _partly_stale(
    session: AsyncSession,
    chunks: Chunks,
    system_id: str,
    found: list[tuple[int, bytes | None]],
    start_s: int,
    end_s: int,
) -> EnergySeries:
    """The rows in [start_s, end_s) of a system's chunks of the range, (chunk, blob) in
    chunk order, some of them stale: the packed ones decoded, each stale one's rows read
    from the series' table over its own span only. A writer that bypasses the store (an
    operator's SQL; the fleet benchmark's loader, which commits a quarter-hour every 5 ms
    into each system's newest chunk) leaves one chunk of a range stale, and the range's
    other rows need not come back as Python objects for it. (The stale spans are read by
    statements after the one that read the blobs: a commit in between could show one chunk
    before it and another after, as a system read before its rows could; what a request
    keeps is kept under the version read before both, which that commit has changed.)"""
    series, shift = chunks.series, chunks.shift
    kinds = [kind for _, kind in series.columns]
    parts: list[list[npt.NDArray[Any]]] = []
    for chunk, blob in found:
        if blob is not None:
            parts.append(_within(np.frombuffer(blob, chunks.record), series, start_s, end_s))
            continue
        span = (max(start_s, chunk << shift), min(end_s, (chunk + 1) << shift))
        rows = await sqlite_fetchall(session, _range_sql(series), (system_id, *span))
        parts.append(_columns(rows, kinds))
    if not parts:
        return series.empty()
    return series.rows([np.concatenate(column) for column in zip(*parts, strict=True)])


def _fields(records: npt.NDArray[Any], series: Series) -> list[npt.NDArray[Any]]:
    # Contiguous copies: the callers get arrays of their own, as from the rows (a field of
    # the blob's records is a read-only strided view).
    return [np.ascontiguousarray(records[name]) for name, _ in series.columns]


_HEAD = f"SELECT {HEAD_COLUMNS} FROM systems WHERE id = ?"  # noqa: S608 - constants


class SqliteReadingStore:
    stores_new_batches = False

    async def rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> EnergySeries:
        chunks = CHUNKS.get(series)
        if chunks is not None and end_s > start_s:
            lo, hi = chunks.span(start_s, end_s)
            found = await sqlite_fetchall(session, chunks.of_one, (system_id, lo, hi))
            rows = _unpacked(chunks, [blob for _, blob in found], start_s, end_s)
            if rows is None:
                rows = await _partly_stale(session, chunks, system_id, found, start_s, end_s)
            return rows
        return await self._rows(session, series, system_id, start_s, end_s)

    async def _rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> EnergySeries:
        """`rows` from the series' own table."""
        rows = await sqlite_fetchall(session, _range_sql(series), (system_id, start_s, end_s))
        return series.rows(_columns(rows, [kind for _, kind in series.columns]))

    async def rows_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, EnergySeries]:
        if len(system_ids) > MAX_OWNERS:
            raise ValueError(f"rows_of_many reads at most {MAX_OWNERS:,} systems at once")
        chunks = CHUNKS.get(series)
        if chunks is not None and end_s > start_s:
            owner, arrays = await self._chunks_of_many(session, chunks, system_ids, start_s, end_s)
        else:
            owner, arrays = await self._columns_of_many(session, series, system_ids, start_s, end_s)
        owners, ordered = in_owner_order(owner, arrays)
        return owners, series.rows(ordered)

    async def _chunks_of_many(
        self,
        session: AsyncSession,
        chunks: Chunks,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, list[npt.NDArray[Any]]]:
        """`_columns_of_many` of a packed copy from its chunks; the systems with a stale chunk
        in the range read theirs from the series' table (each system's rows come whole from
        one or the other)."""
        series = chunks.series
        ids = orjson.dumps(list(system_ids)).decode()
        lo, hi = chunks.span(start_s, end_s)
        found = await sqlite_fetchall(session, chunks.of_many, (ids, lo, hi))
        stale = {key for key, blob in found if blob is None}
        if stale:
            found = [(key, blob) for key, blob in found if key not in stale]
        keys = np.fromiter((key for key, _ in found), np.int64, len(found))
        blobs = [blob for _, blob in found]
        sizes = np.fromiter(map(len, blobs), np.int64, len(blobs)) // chunks.record.itemsize
        records = np.frombuffer(b"".join(blobs), chunks.record)
        owner = np.repeat(keys, sizes)
        starts = records[series.key]
        inside = (starts >= start_s) & (starts < end_s)
        if not bool(inside.all()):
            # (`take` of the kept places: a boolean index of the structured records costs
            # several times as much)
            kept = np.flatnonzero(inside)
            owner, records = owner.take(kept), records.take(kept)
        arrays = _fields(records, series)
        if stale:
            ordered = sorted(stale)
            read, fresh = await self._columns_of_many(
                session, series, [system_ids[k] for k in ordered], start_s, end_s
            )
            owner = np.concatenate([owner, np.asarray(ordered, dtype=np.int64)[read]])
            arrays = [np.concatenate(pair) for pair in zip(arrays, fresh, strict=True)]
        return owner, arrays

    async def _columns_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, list[npt.NDArray[Any]]]:
        """The rows of the systems in the range from the series' own table: each row's
        owner (its place in `system_ids`) and the columns of `series` in its order."""
        ids = orjson.dumps(list(system_ids)).decode()
        rows = await sqlite_fetchall(session, _many_sql(series), (ids, start_s, end_s))
        # One structured array from the row tuples (a third less than a flat float array of
        # one more column, measured on a month of 1,000 systems' days).
        records = np.fromiter(rows, dtype=_many_record(series), count=len(rows))
        packed = records["packed"]
        columns: dict[str, npt.NDArray[Any]] = {}
        if _packs_samples(series):
            columns["samples"] = packed & ((1 << _SAMPLES_BITS) - 1)
            packed = packed >> _SAMPLES_BITS
        owner = packed >> _OWNER_SHIFT
        arrays = [packed - (owner << _OWNER_SHIFT)]
        arrays += [
            columns[name] if name in columns else records[name] for name, _ in series.columns[1:]
        ]
        return owner, arrays

    async def system_and_rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> tuple[SystemHead | None, EnergySeries]:
        chunks = CHUNKS.get(series)
        if chunks is None or end_s <= start_s:
            # Two reads: a join would repeat the system's columns on each of the rows (five
            # Python strings a row), where a packed rollup's are one to three.
            system = await self.system_head(session, system_id)
            if system is None:
                return None, series.empty()
            return system, await self.rows(session, series, system_id, start_s, end_s)
        # One statement, so one read transaction (one snapshot, half the locking of two):
        # the system and its chunks of the range.
        lo, hi = chunks.span(start_s, end_s)
        found = await sqlite_fetchall(session, chunks.with_head, (lo, hi, system_id))
        if not found:
            return None, series.empty()
        first = found[0]
        system = SystemHead(first[0], first[1], first[2], first[3], first[4])
        blobs = [row[6] for row in found] if first[5] is not None else []
        rows = _unpacked(chunks, blobs, start_s, end_s)
        if rows is None:  # a stale chunk: its span from the series' table
            chunked = [(row[5], row[6]) for row in found]
            rows = await _partly_stale(session, chunks, system_id, chunked, start_s, end_s)
        return system, rows

    async def system_head(self, session: AsyncSession, system_id: str) -> SystemHead | None:
        rows = await sqlite_fetchall(session, _HEAD, (system_id,))
        return SystemHead._make(rows[0]) if rows else None

    async def upsert(
        self, session: AsyncSession, upsert: Upsert, system_id: str, values: list[list[Any]]
    ) -> None:
        if not values[0]:
            return
        names = ", ".join(upsert.columns)
        marks = ", ".join("?" for _ in range(len(upsert.columns) + 1))
        sql = (
            f"INSERT INTO {upsert.table} (system_id, {names}) "  # noqa: S608 - constants
            f"VALUES ({marks}) {upsert.conflict_clause()}"
        )
        connection = await session.connection()
        # zip builds the row tuples in C; repeat() is endless, so not strict.
        rows = list(zip(itertools.repeat(system_id), *values, strict=False))
        await connection.exec_driver_sql(sql, rows)
        chunks = _CHUNKED_TABLES.get(upsert.table)
        if chunks is not None:
            await _pack_chunks(session, chunks, system_id, min(values[0]), max(values[0]))

    async def store_new(
        self, session: AsyncSession, batch: NewBatch
    ) -> tuple[datetime, datetime] | None:
        # One writer at a time, and a statement costs microseconds, not a round trip: the
        # general way (lock, insert, rollups, span, event) is already cheap here.
        return None

    async def open_batch(self, session: AsyncSession, change: ChangeOwner, starts: IntArray) -> int:
        # One row per write, `seq` the next AUTOINCREMENT rowid (never reused): SQLite has
        # one writer at a time, so `seq` order is commit order. Not split by month (the
        # rowid is the key, one per row): a write of two quarter-hours months apart makes
        # the feed read the system's range between them once.
        result = await session.execute(
            _OPEN_BATCH,
            {
                "account_id": change.account_id,
                "environment": change.environment,
                "system_id": change.system_id,
                "lo": int(starts.min()),
                "hi": int(starts.max()),
            },
        )
        return int(result.scalar_one())


async def _pack_chunks(
    session: AsyncSession, chunks: Chunks, system_id: str, first_s: int, last_s: int
) -> None:
    """Pack the system's chunks from `first_s`'s to `last_s`'s again from the rollup's table,
    in the session's transaction (its triggers marked them stale)."""
    series, shift = chunks.series, chunks.shift
    lo, hi = first_s >> shift, last_s >> shift
    # Through the driver's connection (the session's, so in its transaction): SQLAlchemy's
    # result rows cost more than the read itself on a chunk's few dozen rows, every upload.
    raw = await driver_connection(session)
    rows = await raw.execute_fetchall(
        _range_sql(series), (system_id, lo << shift, (hi + 1) << shift)
    )
    if not rows:
        return
    columns = _columns(rows, [kind for _, kind in series.columns])
    records = np.empty(len(rows), chunks.record)
    for (name, _), column in zip(series.columns, columns, strict=True):
        records[name] = column
    chunk = records[series.key] >> shift
    cuts = np.flatnonzero(chunk[1:] != chunk[:-1]) + 1
    packed = [
        (system_id, int(part[series.key][0]) >> shift, part.tobytes())
        for part in np.split(records, cuts)
    ]
    await raw.executemany(chunks.pack, packed)


async def pack_stale_chunks(session: AsyncSession) -> int:
    """Pack again every stale chunk of the packed copies, in the session's transaction; how
    many. A write around the store leaves its chunks stale (retention's delete of the
    quarter-hours past the horizon, an operator's SQL) until an upload touches them: a chunk
    across the horizon would never be read packed again. (A scan of each copy's table: a
    few tens of thousands of rows per month of 1,000 systems.)"""
    raw = await driver_connection(session)
    packed = 0
    for chunks in CHUNKS.values():
        stale = await raw.execute_fetchall(
            f"SELECT system_id, chunk FROM {chunks.table} WHERE {chunks.column} IS NULL"  # noqa: S608
        )
        for system_id, chunk in stale:
            start_s = chunk << chunks.shift
            await _pack_chunks(session, chunks, system_id, start_s, start_s)
            packed += 1
    return packed


_OPEN_BATCH = text(
    "INSERT INTO change_batches (account_id, environment, txid, system_id, lo_s, hi_s) "
    "VALUES (:account_id, :environment, 0, :system_id, :lo, :hi) RETURNING seq"
)
