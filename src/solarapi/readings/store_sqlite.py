"""The SQLite `ReadingStore`: range reads through `db.sqlite_fetchall` (outside a write
transaction on the event loop's own `sqlite3` connection, where a read costs microseconds
instead of a hand-over to aiosqlite's thread), bulk writes as an `executemany` of one
prepared statement.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import sqlite_fetchall
from solarapi.kit.grid import EnergySeries, IntArray
from solarapi.readings.store import (
    DAYS,
    NUMPY_TYPES,
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


# The local-day rollup packed per system and `day_start_s >> CHUNK_SHIFT` (~48.5 days) in
# `reading_day_chunks` (models.readings.ReadingDayChunk, migration 0022): a month of a
# system's days is one or two blobs instead of three Python objects per day.
CHUNK_SHIFT = 22
DAY_RECORD = np.dtype(
    [("day_start_s", "<i8"), ("energy_wh", "<f8"), ("samples", "<i8"), ("power_max_w", "<f8")]
)
_CHUNKS_OF_ONE = (
    "SELECT days FROM reading_day_chunks WHERE system_id = ? AND chunk >= ? AND chunk <= ? "
    "ORDER BY chunk"
)
# CROSS JOIN: json_each stays the outer loop, so the chunks come system by system in the
# array's order, each system's in chunk (= time) order (`in_owner_order` checks it).
_CHUNKS_OF_MANY = (
    "SELECT j.key, c.days FROM json_each(?) AS j CROSS JOIN reading_day_chunks AS c "
    "WHERE c.system_id = j.value AND c.chunk >= ? AND c.chunk <= ?"
)
_DAYS_OF_CHUNKS = (
    "SELECT day_start_s, energy_wh, samples, power_max_w FROM reading_days "
    "WHERE system_id = ? AND day_start_s >= ? AND day_start_s < ? ORDER BY day_start_s"
)
_PACK = "INSERT OR REPLACE INTO reading_day_chunks (system_id, chunk, days) VALUES (?, ?, ?)"


def _chunk_span(start_s: int, end_s: int) -> tuple[int, int]:
    """The first and last chunk holding a day in [start_s, end_s) (end_s > start_s)."""
    return start_s >> CHUNK_SHIFT, (end_s - 1) >> CHUNK_SHIFT


def _days_within(records: npt.NDArray[Any], start_s: int, end_s: int) -> list[npt.NDArray[Any]]:
    """`DAYS`'s columns (day_start_s, energy_wh, samples, power_max_w) of the packed
    `records` whose day starts in [start_s, end_s)."""
    starts = records["day_start_s"]
    inside = (starts >= start_s) & (starts < end_s)
    if not bool(inside.all()):
        records = records[inside]
    return _fields(records)


def _fields(records: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
    # Contiguous copies: the callers get arrays of their own, as from the rows (a field of
    # the blob's records is a read-only strided view).
    return [np.ascontiguousarray(records[name]) for name, _ in DAYS.columns]


_HEAD = f"SELECT {HEAD_COLUMNS} FROM systems WHERE id = ?"  # noqa: S608 - constants


class SqliteReadingStore:
    stores_new_batches = False
    reads_round_trip = False

    async def rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> EnergySeries:
        if series is DAYS and end_s > start_s:
            lo, hi = _chunk_span(start_s, end_s)
            chunks = await sqlite_fetchall(session, _CHUNKS_OF_ONE, (system_id, lo, hi))
            if all(days is not None for (days,) in chunks):
                records = np.frombuffer(b"".join(days for (days,) in chunks), DAY_RECORD)
                return series.rows(_days_within(records, start_s, end_s))
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
        if series is DAYS and end_s > start_s:
            return await self._days_of_many(session, system_ids, start_s, end_s)
        return await self._rows_of_many(session, series, system_ids, start_s, end_s)

    async def _days_of_many(
        self, session: AsyncSession, system_ids: Sequence[str], start_s: int, end_s: int
    ) -> tuple[IntArray, EnergySeries]:
        """`rows_of_many` of `DAYS` from the packed chunks; the systems with a stale chunk
        in the range read theirs from `reading_days` (each system's days come whole from
        one or the other)."""
        ids = orjson.dumps(list(system_ids)).decode()
        lo, hi = _chunk_span(start_s, end_s)
        chunks = await sqlite_fetchall(session, _CHUNKS_OF_MANY, (ids, lo, hi))
        stale = {key for key, days in chunks if days is None}
        if stale:
            chunks = [(key, days) for key, days in chunks if key not in stale]
        keys = np.fromiter((key for key, _ in chunks), np.int64, len(chunks))
        blobs = [days for _, days in chunks]
        sizes = np.fromiter(map(len, blobs), np.int64, len(blobs)) // DAY_RECORD.itemsize
        records = np.frombuffer(b"".join(blobs), DAY_RECORD)
        owner = np.repeat(keys, sizes)
        starts = records["day_start_s"]
        inside = (starts >= start_s) & (starts < end_s)
        if not bool(inside.all()):
            owner, records = owner[inside], records[inside]
        arrays = _fields(records)
        if stale:
            ordered = sorted(stale)
            found, rows = await self._rows_of_many(
                session, DAYS, [system_ids[k] for k in ordered], start_s, end_s
            )
            owner = np.concatenate([owner, np.asarray(ordered, dtype=np.int64)[found]])
            arrays = [
                np.concatenate([packed, read])
                for packed, read in zip(
                    arrays,
                    [rows.starts, rows.energy_wh, rows.samples, rows.power_max_w],
                    strict=True,
                )
            ]
        owners, ordered_arrays = in_owner_order(owner, arrays)
        return owners, DAYS.rows(ordered_arrays)

    async def _rows_of_many(
        self,
        session: AsyncSession,
        series: Series,
        system_ids: Sequence[str],
        start_s: int,
        end_s: int,
    ) -> tuple[IntArray, EnergySeries]:
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
        owners, ordered = in_owner_order(owner, arrays)
        return owners, series.rows(ordered)

    async def system_and_rows(
        self, session: AsyncSession, series: Series, system_id: str, start_s: int, end_s: int
    ) -> tuple[SystemHead | None, EnergySeries]:
        # Two reads on the event loop's connection: a join would repeat the system's columns
        # on every row, and a read here costs microseconds, not a round trip.
        system = await self.system_head(session, system_id)
        if system is None:
            return None, series.empty()
        return system, await self.rows(session, series, system_id, start_s, end_s)

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
        if upsert.table == DAYS.name:
            await _pack_chunks(session, system_id, min(values[0]), max(values[0]))

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


async def _pack_chunks(session: AsyncSession, system_id: str, first_s: int, last_s: int) -> None:
    """Pack the system's chunks of `reading_day_chunks` from `first_s`'s to `last_s`'s again
    from `reading_days`, in the session's transaction (its triggers marked them stale)."""
    lo, hi = first_s >> CHUNK_SHIFT, last_s >> CHUNK_SHIFT
    connection = await session.connection()
    result = await connection.exec_driver_sql(
        _DAYS_OF_CHUNKS, (system_id, lo << CHUNK_SHIFT, (hi + 1) << CHUNK_SHIFT)
    )
    rows = list(result.fetchall())
    if not rows:
        return
    columns = _columns(rows, [kind for _, kind in DAYS.columns])
    records = np.empty(len(rows), DAY_RECORD)
    for (name, _), column in zip(DAYS.columns, columns, strict=True):
        records[name] = column
    chunk = records["day_start_s"] >> CHUNK_SHIFT
    cuts = np.flatnonzero(chunk[1:] != chunk[:-1]) + 1
    packed = [
        (system_id, int(part["day_start_s"][0]) >> CHUNK_SHIFT, part.tobytes())
        for part in np.split(records, cuts)
    ]
    await connection.exec_driver_sql(_PACK, packed)


_OPEN_BATCH = text(
    "INSERT INTO change_batches (account_id, environment, txid, system_id, lo_s, hi_s) "
    "VALUES (:account_id, :environment, 0, :system_id, :lo, :hi) RETURNING seq"
)
