"""Quarter-hour prices per zone, cached in process and checked against the zone's import
version on every use.

Prices change only when an import runs, and every import bumps the zone's version row in
the same transaction, so one primary-key lookup per request tells whether the cache is
current, in any number of processes. Reading and expanding a year of 15-minute rows costs
tens of milliseconds; the lookup costs well under one.

The cache holds fixed chunks of 2^15 quarter-hours (~341 days) aligned to the epoch, keyed by
database, zone, version and chunk, least recently used first out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from cachetools import LRUCache
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import QUARTER_S
from solarapi.prices import repository

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.int8]

CHUNK_QUARTERS = 1 << 15
CHUNK_S = CHUNK_QUARTERS * QUARTER_S
# 64 chunks × (8 + 1) bytes × 32,768 ≈ 19 MB at most: every zone's last few years.
MAX_CHUNKS = 64


@dataclass(frozen=True, slots=True)
class QuarterPrices:
    """Per quarter-hour of a range: the price (NaN = none) and its source code
    (`repository.SOURCE_CODES`, 0 = none)."""

    prices: FloatArray
    sources: CodeArray


_ChunkKey = tuple[str, str, int, int]  # database, zone, version, chunk index
_chunks: LRUCache[_ChunkKey, QuarterPrices] = LRUCache(maxsize=MAX_CHUNKS)


def spread_to_quarters(
    starts: IntArray, resolution_s: IntArray, start_s: int, count: int
) -> tuple[IntArray, IntArray]:
    """For periods [starts[i], starts[i] + resolution_s[i]) on the 15-minute grid: the slot
    (quarter-hour index from `start_s`) of each quarter-hour they cover inside [0, count),
    and the index of the period covering it."""
    per_period = resolution_s // QUARTER_S
    period = np.repeat(np.arange(len(starts), dtype=np.int64), per_period)
    first_slot = (starts - start_s) // QUARTER_S
    offsets = np.arange(len(period), dtype=np.int64) - np.repeat(
        np.cumsum(per_period) - per_period, per_period
    )
    slots = first_slot[period] + offsets
    inside = (slots >= 0) & (slots < count)
    return slots[inside], period[inside]


def expand_to_quarters(
    starts: IntArray, resolution_s: IntArray, prices: FloatArray, start_s: int, end_s: int
) -> FloatArray:
    """Price per quarter-hour of [start_s, end_s); NaN where no period covers it. A period
    covers each quarter-hour inside it with its own price."""
    count = (end_s - start_s) // QUARTER_S
    quarters = np.full(count, np.nan)
    slots, period = spread_to_quarters(starts, resolution_s, start_s, count)
    quarters[slots] = prices[period]
    return quarters


async def _load_chunk(session: AsyncSession, zone: str, index: int) -> QuarterPrices:
    start_s = index * CHUNK_S
    stored = await repository.read_prices(session, zone, start_s, start_s + CHUNK_S)
    prices = np.full(CHUNK_QUARTERS, np.nan)
    sources = np.zeros(CHUNK_QUARTERS, dtype=np.int8)
    slots, period = spread_to_quarters(stored.starts, stored.resolution_s, start_s, CHUNK_QUARTERS)
    prices[slots] = stored.prices[period]
    sources[slots] = stored.sources[period]
    prices.flags.writeable = False
    sources.flags.writeable = False
    return QuarterPrices(prices, sources)


def _database_key(session: AsyncSession) -> str:
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    return engine.url.render_as_string(hide_password=True)


async def quarter_prices(
    session: AsyncSession, zone: str, start_s: int, end_s: int
) -> QuarterPrices:
    """Stored prices of `zone` per quarter-hour of [start_s, end_s) (15-minute grid)."""
    count = (end_s - start_s) // QUARTER_S
    version = await repository.zone_version(session, zone)
    if version == 0:
        return QuarterPrices(np.full(count, np.nan), np.zeros(count, dtype=np.int8))
    database = _database_key(session)
    pieces: list[QuarterPrices] = []
    for index in range(start_s // CHUNK_S, (end_s - 1) // CHUNK_S + 1):
        key = (database, zone, version, index)
        chunk = _chunks.get(key)  # a hit makes the chunk the most recent
        if chunk is None:
            chunk = await _load_chunk(session, zone, index)
            _chunks[key] = chunk  # evicts the least recently used chunk when full
        lo = max(start_s, index * CHUNK_S)
        hi = min(end_s, (index + 1) * CHUNK_S)
        a = (lo - index * CHUNK_S) // QUARTER_S
        b = (hi - index * CHUNK_S) // QUARTER_S
        pieces.append(QuarterPrices(chunk.prices[a:b], chunk.sources[a:b]))
    if len(pieces) == 1:
        return pieces[0]
    return QuarterPrices(
        np.concatenate([piece.prices for piece in pieces]),
        np.concatenate([piece.sources for piece in pieces]),
    )
