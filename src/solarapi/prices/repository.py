"""SQL of the prices area. Range reads return numpy arrays of epoch seconds: a year of
15-minute prices is 35,000 rows, too many to build ORM objects or datetimes for."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import BigInteger, ColumnElement, Table, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from solarapi.models.prices import MarketPrice, MarketPriceZone
from solarapi.prices.price_rows import PriceRow, PriceSource

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


SOURCE_CODES: dict[PriceSource, int] = {"entsoe": 1, "csv": 2, "simulated": 3}  # 0 = no price
SOURCE_NAMES: dict[int, PriceSource] = {code: name for name, code in SOURCE_CODES.items()}


@dataclass(frozen=True, slots=True)
class StoredPrices:
    """Stored price periods of one zone, sorted by start: [starts[i], starts[i] + resolution_s[i]).
    `sources` holds `SOURCE_CODES` values."""

    starts: IntArray
    resolution_s: IntArray
    prices: FloatArray
    sources: npt.NDArray[np.int8]


async def read_prices(session: AsyncSession, zone: str, start_s: int, end_s: int) -> StoredPrices:
    """Every stored period of `zone` that overlaps [start_s, end_s)."""
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
    rows = (await session.execute(query)).all()
    count = len(rows)
    stored = StoredPrices(
        np.fromiter((row[0] for row in rows), dtype=np.int64, count=count),
        np.fromiter((row[1] for row in rows), dtype=np.int64, count=count),
        np.fromiter((row[2] for row in rows), dtype=np.float64, count=count),
        np.fromiter((SOURCE_CODES[row[3]] for row in rows), dtype=np.int8, count=count),
    )
    reaches = stored.starts + stored.resolution_s > start_s
    if reaches.all():
        return stored
    return StoredPrices(
        stored.starts[reaches],
        stored.resolution_s[reaches],
        stored.prices[reaches],
        stored.sources[reaches],
    )


async def zone_version(session: AsyncSession, zone: str) -> int:
    """The zone's import counter; 0 when it never had prices."""
    query = select(MarketPriceZone.version).where(MarketPriceZone.zone == zone)
    return int((await session.execute(query)).scalar_one_or_none() or 0)


async def bump_zone_version(session: AsyncSession, zone: str, now: datetime) -> None:
    """Give the zone a new version. Random rather than counted: a version read from a
    transaction that then rolled back can never come back with other prices."""
    version = secrets.randbits(62) + 1
    result = await session.execute(
        update(MarketPriceZone)
        .where(MarketPriceZone.zone == zone)
        .values(version=version, updated_at=now)
    )
    if not getattr(result, "rowcount", 0):
        await session.execute(
            insert(MarketPriceZone).values(zone=zone, version=version, updated_at=now)
        )


async def overlapping_rows(
    session: AsyncSession, zone: str, start_s: int, end_s: int
) -> list[tuple[PriceRow, str]]:
    """Stored periods of `zone` that overlap [start_s, end_s), with their source, by start."""
    stored = await read_prices(session, zone, start_s, end_s)
    return [
        (PriceRow(int(start), int(resolution_s), float(price)), SOURCE_NAMES[int(code)])
        for start, resolution_s, price, code in zip(
            stored.starts, stored.resolution_s, stored.prices, stored.sources, strict=True
        )
    ]


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
