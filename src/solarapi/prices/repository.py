"""SQL of the prices area. Range reads return numpy arrays of epoch seconds: a year of
15-minute prices is 35,000 rows, too many to build ORM objects or datetimes for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import BigInteger, ColumnElement, Table, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from solarapi.models.prices import MarketPrice
from solarapi.prices.imports import PriceRow, PriceSource

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# The longest published period: a row starting this long before a range can still reach
# into it, so range reads look back this far on the (zone, start) index.
LONGEST_PERIOD_S = 3600
_INSERT_BATCH = 5000


_TABLE = cast(Table, MarketPrice.__table__)


class _EpochSeconds(FunctionElement[int]):
    """A UTC timestamp column as integer epoch seconds, computed by the database."""

    type = BigInteger()
    inherit_cache = True


@compiles(_EpochSeconds, "sqlite")
def _epoch_sqlite(element: _EpochSeconds, compiler: SQLCompiler, **kw: Any) -> str:
    # UtcDateTime stores naive UTC text on SQLite; strftime('%s') reads it as UTC.
    return f"CAST(strftime('%s', {compiler.process(element.clauses, **kw)}) AS INTEGER)"


@compiles(_EpochSeconds, "postgresql")
def _epoch_postgresql(element: _EpochSeconds, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST(EXTRACT(EPOCH FROM {compiler.process(element.clauses, **kw)}) AS BIGINT)"


def epoch_seconds(column: ColumnElement[datetime]) -> _EpochSeconds:
    return _EpochSeconds(column)


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@dataclass(frozen=True, slots=True)
class StoredPrices:
    """Stored price periods of one zone, sorted by start: [starts[i], starts[i] + resolution_s[i])."""

    starts: IntArray
    resolution_s: IntArray
    prices: FloatArray


async def read_prices(session: AsyncSession, zone: str, start_s: int, end_s: int) -> StoredPrices:
    """Every stored period of `zone` that overlaps [start_s, end_s)."""
    table = _TABLE
    query = (
        select(
            epoch_seconds(table.c.start),
            table.c.resolution_s,
            table.c.price_eur_per_mwh,
        )
        .where(
            table.c.zone == zone,
            table.c.start >= _utc(start_s - LONGEST_PERIOD_S),
            table.c.start < _utc(end_s),
        )
        .order_by(table.c.start)
    )
    rows = (await session.execute(query)).all()
    if not rows:
        empty = np.empty(0, dtype=np.int64)
        return StoredPrices(empty, empty, np.empty(0, dtype=np.float64))
    starts, resolutions, prices = zip(*rows, strict=True)
    stored = StoredPrices(
        np.fromiter(starts, dtype=np.int64, count=len(rows)),
        np.fromiter(resolutions, dtype=np.int64, count=len(rows)),
        np.fromiter(prices, dtype=np.float64, count=len(rows)),
    )
    reaches = stored.starts + stored.resolution_s > start_s
    if reaches.all():
        return stored
    return StoredPrices(
        stored.starts[reaches], stored.resolution_s[reaches], stored.prices[reaches]
    )


async def source_coverage(
    session: AsyncSession, zone: str, start_s: int, end_s: int
) -> dict[str, int]:
    """Seconds of [start_s, end_s) (roughly: whole periods) covered per source."""
    table = _TABLE
    query = (
        select(table.c.source, func.sum(table.c.resolution_s))
        .where(
            table.c.zone == zone,
            table.c.start > _utc(start_s - LONGEST_PERIOD_S),
            table.c.start < _utc(end_s),
        )
        .group_by(table.c.source)
    )
    return {source: int(seconds) for source, seconds in (await session.execute(query)).all()}


async def overlapping_rows(
    session: AsyncSession, zone: str, start_s: int, end_s: int
) -> list[tuple[PriceRow, str]]:
    """Stored periods of `zone` that overlap [start_s, end_s), with their source, by start."""
    table = _TABLE
    query = (
        select(
            epoch_seconds(table.c.start),
            table.c.resolution_s,
            table.c.price_eur_per_mwh,
            table.c.source,
        )
        .where(
            table.c.zone == zone,
            table.c.start >= _utc(start_s - LONGEST_PERIOD_S),
            table.c.start < _utc(end_s),
        )
        .order_by(table.c.start)
    )
    found: list[tuple[PriceRow, str]] = []
    for start, resolution_s, price, source in (await session.execute(query)).all():
        row = PriceRow(int(start), int(resolution_s), float(price))
        if row.end > start_s:
            found.append((row, str(source)))
    return found


async def delete_starting_in(session: AsyncSession, zone: str, start_s: int, end_s: int) -> int:
    """Delete the periods of `zone` that start in [start_s, end_s); returns how many."""
    table = _TABLE
    result = await session.execute(
        delete(table).where(
            table.c.zone == zone,
            table.c.start >= _utc(start_s),
            table.c.start < _utc(end_s),
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def insert_rows(
    session: AsyncSession,
    zone: str,
    rows: Iterable[PriceRow],
    source: PriceSource,
    now: datetime,
) -> int:
    table = _TABLE
    batch: list[dict[str, object]] = []
    count = 0
    for row in rows:
        batch.append(
            {
                "zone": zone,
                "start": _utc(row.start),
                "resolution_s": row.resolution_s,
                "price_eur_per_mwh": row.price_eur_per_mwh,
                "source": source,
                "imported_at": now,
            }
        )
        if len(batch) >= _INSERT_BATCH:
            await session.execute(insert(table), batch)
            count += len(batch)
            batch = []
    if batch:
        await session.execute(insert(table), batch)
        count += len(batch)
    return count


async def latest_start(session: AsyncSession, zone: str) -> datetime | None:
    query = select(func.max(MarketPrice.start)).where(MarketPrice.zone == zone)
    return (await session.execute(query)).scalar_one_or_none()
