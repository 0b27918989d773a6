"""Rules of the prices area: imports that replace, the price query and the quarter-hour
price series the market value is computed from.

Everything is computed on the 15-minute grid: every published resolution (PT15M, PT30M,
PT60M) is a whole number of quarter-hours, so a price period becomes the quarter-hours it
covers, and a bucket's time-weighted mean is the plain mean of its priced quarter-hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast, get_args
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import (
    QUARTER_S,
    FloatArray,
    IntArray,
    Interval,
    SeriesQuery,
)
from solarapi.kit.plans import Environment
from solarapi.kit.text import excerpt
from solarapi.kit.zones import ZONES, Zone
from solarapi.prices import repository
from solarapi.prices.cache import quarter_prices
from solarapi.prices.price_rows import (
    ParsedPrices,
    PriceFileError,
    PriceRow,
    PriceSequence,
    PriceSource,
    ResolutionSpan,
    resolution_spans,
)
from solarapi.prices.rendering import MarketPrices, PriceTotals

# The market value renders its buckets with the same rounding.
from solarapi.prices.rendering import rounded_or_none as rounded_or_none

PRICE_INTERVALS: tuple[Interval, ...] = (
    Interval.MIN15,
    Interval.HOUR,
    Interval.DAY,
    Interval.WEEK,
    Interval.MONTH,
)


def find_zone(code: str | None) -> Zone:
    if code is None or code == "":
        raise ValidationFailed("zone is required, e.g. zone=NL (see GET /market-prices/zones)")
    zone = ZONES.get(code)
    if zone is None:
        raise ValidationFailed(
            f"zone must be one of {', '.join(ZONES)}; got '{excerpt(code)}' (see GET /market-prices/zones)"
        )
    return zone


def zone_list() -> tuple[Zone, ...]:
    return tuple(ZONES.values())


# --- imports --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportResult:
    zone: str
    source: str
    stored: int
    replaced: int
    first_start: datetime
    last_end: datetime
    resolutions_s: tuple[int, ...]
    # What was stored per resolution; the ENTSO-E sequence stored (None: CSV, or a document
    # without sequences) and the sequences skipped (other auctions, never stored).
    spans: tuple[ResolutionSpan, ...] = ()
    sequence: int | None = None
    skipped: tuple[PriceSequence, ...] = ()


async def import_prices(session: AsyncSession, parsed: ParsedPrices, now: datetime) -> ImportResult:
    """Store `parsed.rows`, replacing whatever the zone had for the time they cover.

    An import is authoritative for the quarter-hours it covers. A stored period that lies
    partly outside them (an hourly price under a new 15-minute half-hour) keeps its price for
    the uncovered quarter-hours, stored as 15-minute periods, so nothing overlaps and nothing
    outside the import changes. Runs in the caller's transaction: all or nothing.
    """
    rows = parsed.rows
    zone = parsed.zone.code
    if not rows:
        raise PriceFileError("the file holds no prices")
    covered: set[int] = set()
    for row in rows:
        covered.update(range(row.start, row.end, QUARTER_S))
    replaced: dict[int, tuple[PriceRow, str]] = {}
    for span_start, span_end in _spans(rows):
        existing = await repository.overlapping_rows(session, zone, span_start, span_end)
        if not existing:
            continue
        for old, source in existing:
            replaced[old.start] = (old, source)
        await repository.delete_starting_in(session, zone, existing[0][0].start, span_end)
    # What is left of partly covered periods keeps its own price and source.
    for old_source in sorted({source for _, source in replaced.values()}):
        remainders = [
            PriceRow(slot, QUARTER_S, old.price_eur_per_mwh)
            for old, source in replaced.values()
            if source == old_source
            for slot in range(old.start, old.end, QUARTER_S)
            if slot not in covered
        ]
        await repository.insert_rows(session, zone, remainders, _source(old_source), now)
    stored = await repository.insert_rows(session, zone, rows, parsed.source, now)
    await repository.bump_zone_version(session, zone, now)
    return ImportResult(
        zone=zone,
        source=parsed.source,
        stored=stored,
        replaced=len(replaced),
        first_start=datetime.fromtimestamp(rows[0].start, UTC),
        last_end=datetime.fromtimestamp(rows[-1].end, UTC),
        resolutions_s=tuple(sorted({row.resolution_s for row in rows})),
        spans=tuple(resolution_spans(rows)),
        sequence=parsed.sequence,
        skipped=parsed.skipped,
    )


def _source(name: str) -> PriceSource:
    for source in get_args(PriceSource):
        if source == name:
            return cast(PriceSource, source)
    raise ValueError(f"unknown price source {name!r} in the database")


def _spans(rows: list[PriceRow]) -> list[tuple[int, int]]:
    """Contiguous stretches covered by `rows` (sorted, non-overlapping)."""
    spans: list[tuple[int, int]] = []
    for row in rows:
        if spans and spans[-1][1] == row.start:
            spans[-1] = (spans[-1][0], row.end)
        else:
            spans.append((row.start, row.end))
    return spans


# --- the quarter-hour price series ----------------------------------------------------------


async def quarter_hour_prices(
    session: AsyncSession, environment: Environment, zone: Zone, start_s: int, end_s: int
) -> tuple[FloatArray, PriceSource | None]:
    """Prices per quarter-hour of [start_s, end_s) for `environment`, and their source: the
    one covering most of the range (None without any price).

    Live prices are the imported ones; the sandbox gets the simulated model's.
    """
    return (await zone_prices(session, environment, zone, start_s, end_s)).between(start_s, end_s)


@dataclass(frozen=True, slots=True)
class ZonePrices:
    """A zone's quarter-hour prices of [start_s, start_s + 15 min × len(prices)) and where
    each came from (`repository.SOURCE_CODES`, 0 = none; None: the sandbox's model), read
    once for many ranges inside it (a portfolio's systems of one zone)."""

    start_s: int
    prices: FloatArray
    sources: npt.NDArray[np.int8] | None

    def between(self, start_s: int, end_s: int) -> tuple[FloatArray, PriceSource | None]:
        """The prices of [start_s, end_s) (inside this range) and their source, as
        `quarter_hour_prices` gives them for that range."""
        lo = (start_s - self.start_s) // QUARTER_S
        hi = (end_s - self.start_s) // QUARTER_S
        if self.sources is None:
            return self.prices[lo:hi], "simulated"
        counts = np.bincount(self.sources[lo:hi], minlength=max(repository.SOURCE_NAMES) + 1)
        counts[0] = 0
        source = repository.SOURCE_NAMES[int(counts.argmax())] if counts.any() else None
        return self.prices[lo:hi], source


async def zone_prices(
    session: AsyncSession, environment: Environment, zone: Zone, start_s: int, end_s: int
) -> ZonePrices:
    """The zone's quarter-hour prices of [start_s, end_s) for `environment` (one read)."""
    if start_s % QUARTER_S or end_s % QUARTER_S:
        raise ValueError("quarter-hour prices need a range on the 15-minute grid")
    if environment is Environment.TEST:
        return ZonePrices(start_s, simulated_quarter_prices(zone, start_s, end_s), None)
    quarters = await quarter_prices(session, zone.code, start_s, end_s)
    return ZonePrices(start_s, quarters.prices, quarters.sources)


def simulated_quarter_prices(zone: Zone, start_s: int, end_s: int) -> FloatArray:
    """The sandbox price model's quarter-hours of [start_s, end_s)."""
    # start-up: the model pulls in pandas (~0.7 s to import, measured), which the API and the
    # CLI do not need until the first sandbox price request.
    from solarapi.sandbox.prices import simulate_prices

    count = (end_s - start_s) // QUARTER_S
    quarters = np.full(count, np.nan)
    starts, prices = simulate_prices(
        zone.code, datetime.fromtimestamp(start_s, UTC), datetime.fromtimestamp(end_s, UTC)
    )
    slots = (starts - start_s) // QUARTER_S
    inside = (slots >= 0) & (slots < count)
    quarters[slots[inside]] = prices[inside]
    return quarters


def bucket_means(quarters: FloatArray, edges: IntArray) -> FloatArray:
    """Time-weighted mean price per bucket (edges on the quarter-hour grid, `quarters`
    starting at edges[0]); NaN where no quarter-hour of the bucket has a price."""
    index = (edges[:-1] - edges[0]) // QUARTER_S
    priced = ~np.isnan(quarters)
    sums = np.add.reduceat(np.where(priced, quarters, 0.0), index)
    counts = np.add.reduceat(priced.astype(np.int64), index)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


# --- the price query ------------------------------------------------------------------------


async def market_prices(
    session: AsyncSession,
    environment: Environment,
    zone: Zone,
    query: SeriesQuery,
) -> MarketPrices:
    """Prices of `zone` in the buckets of the query's range widened to its interval on the
    zone's calendar: live prices are the imported ones, the sandbox's the simulated model's."""
    time_range = query.widen(ZoneInfo(zone.timezone))
    edges = time_range.edges()
    quarters, source = await quarter_hour_prices(
        session, environment, zone, int(edges[0]), int(edges[-1])
    )
    return MarketPrices(
        zone=zone,
        time_range=time_range,
        bucket_means=bucket_means(quarters, edges),
        source=source,
        totals=price_totals(quarters),
    )


def baseload_price(quarters: FloatArray) -> float | None:
    """The time-weighted mean of the priced quarter-hours (the *baseload* price), unrounded;
    None without a price."""
    priced = ~np.isnan(quarters)
    return float(quarters[priced].mean()) if priced.any() else None


def price_totals(quarters: FloatArray) -> PriceTotals:
    """`meta.totals` of `/market-prices` over the quarter-hours of the widened range."""
    priced = quarters[~np.isnan(quarters)]
    return PriceTotals(
        mean_price_eur_per_mwh=baseload_price(quarters),
        min_price_eur_per_mwh=float(priced.min()) if len(priced) else None,
        max_price_eur_per_mwh=float(priced.max()) if len(priced) else None,
        priced_quarter_hours=len(priced),
        negative_quarter_hours=int((priced < 0).sum()),
    )
