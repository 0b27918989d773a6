"""Market value of a system's production: its quarter-hours valued at its zone's
day-ahead price, then aggregated.

Valuing each quarter-hour before summing is what makes a sunny noon with a negative price
count as negative value; multiplying a day's energy by its mean price would not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import Conflict, NotFound
from solarapi.kit.grid import (
    QUARTER_S,
    FloatArray,
    IntArray,
    Interval,
    SeriesQuery,
    iso_strings,
    widen_range,
)
from solarapi.kit.plans import Environment
from solarapi.kit.zones import ZONES, Zone
from solarapi.models.systems import ReadableSystem
from solarapi.prices.service import (
    baseload_price,
    bucket_means,
    quarter_hour_prices,
    rounded_or_none,
)
from solarapi.readings.service import over_cap_on_utc, quarter_hours, time_range_of
from solarapi.systems.access import read_system

BoolArray = npt.NDArray[np.bool_]
WH_PER_MWH = 1_000_000.0


def _sum_or_nan(values: FloatArray, present: BoolArray, index: IntArray) -> FloatArray:
    """Per bucket (starting at quarter-hour `index[i]`): the sum of the present values, NaN
    where none is present."""
    sums = np.add.reduceat(np.where(present, values, 0.0), index)
    counts = np.add.reduceat(present.astype(np.int64), index)
    return np.where(counts > 0, sums, np.nan)


async def read_market_value(
    session: AsyncSession,
    principal: Principal,
    system_id: str,
    query: SeriesQuery,
    now: datetime,
) -> MarketValue:
    """`GET /systems/{id}/market-value`: the caller's system `system_id` (404 if it is not
    theirs; 409 without a market zone) valued over the query's range widened to its grid."""
    # The contract's order: 400 (parameters) before 404 (the system) before 409 (its state).
    # Whether the range is over the bucket cap is the system's grid's to say (a zone off the
    # UTC hour moves every edge); the UTC grid's refusal stands when it is not the caller's.
    refused = over_cap_on_utc(query)
    try:
        system = await read_system(session, principal, system_id)
    except NotFound:
        if refused is None:
            raise
        raise refused from None
    if refused is not None:
        time_range_of(system, query.start, query.end, query.interval)  # its own refusal
    zone = priced_zone(system)
    return await value_of(session, system, zone, query.start, query.end, query.interval, now)


def priced_zone(system: ReadableSystem) -> Zone:
    """The market zone whose prices value the system's production; 409 without one."""
    if system.market_zone is None:
        raise Conflict(
            f"System {system.id} has no market_zone, so its production has no price; set one "
            "with PATCH /systems/{id} (see GET /market-prices/zones)"
        )
    zone = ZONES.get(system.market_zone)
    if zone is None:  # a zone since removed from the zones table
        raise Conflict(
            f"System {system.id} has market_zone '{system.market_zone}', which has no prices; "
            "choose one of GET /market-prices/zones"
        )
    return zone


@dataclass(frozen=True, slots=True)
class ValueSums:
    """A system's unrounded sums over its widened range (quarter-hours), for fleet totals."""

    energy_wh: float | None  # None: no reading
    priced_energy_wh: float
    value_eur: float | None  # None: no quarter-hour with both energy and price
    negative_price_energy_wh: float
    negative_price_value_eur: float
    starts: IntArray  # the range's quarter-hours and their prices (the zone's baseload)
    prices: FloatArray


@dataclass(frozen=True, slots=True)
class ValueTotals:
    """`meta.totals` of a market value: the contract's section 6 figures, rounded as
    answered (`capture_price_eur_per_mwh` is `price_eur_per_mwh` under its own name)."""

    energy_wh: float | None
    value_eur: float | None
    price_eur_per_mwh: float | None
    priced_energy_wh: float
    capture_price_eur_per_mwh: float | None
    baseload_price_eur_per_mwh: float | None
    capture_rate: float | None
    negative_price_energy_wh: float
    negative_price_value_eur: float

    def to_api(self) -> dict[str, float | None]:
        return {
            "energy_wh": self.energy_wh,
            "value_eur": self.value_eur,
            "price_eur_per_mwh": self.price_eur_per_mwh,
            "priced_energy_wh": self.priced_energy_wh,
            "capture_price_eur_per_mwh": self.capture_price_eur_per_mwh,
            "baseload_price_eur_per_mwh": self.baseload_price_eur_per_mwh,
            "capture_rate": self.capture_rate,
            "negative_price_energy_wh": self.negative_price_energy_wh,
            "negative_price_value_eur": self.negative_price_value_eur,
        }


@dataclass(frozen=True, slots=True)
class Valued:
    """Quarter-hours of energy × price summed into buckets: per bucket (between `edges`) the
    energy, the volume-weighted price and the value, unrounded (NaN = null), and the
    range's sums and totals."""

    edges: IntArray
    energy_wh: FloatArray
    price_eur_per_mwh: FloatArray
    value_eur: FloatArray
    sums: ValueSums
    totals: ValueTotals


@dataclass(frozen=True, slots=True)
class MarketValue:
    """A system's production valued at its zone's prices in the buckets of a widened range:
    what `GET /systems/{id}/market-value` answers (`render`)."""

    system_id: str
    market_zone: str
    interval: Interval
    timezone: str  # whose clock and calendar the buckets follow
    currency: str
    source: str | None  # where the prices come from; None without a price
    valued: Valued

    @property
    def totals(self) -> ValueTotals:
        return self.valued.totals

    @property
    def sums(self) -> ValueSums:
        return self.valued.sums


async def value_of(
    session: AsyncSession,
    system: ReadableSystem,
    zone: Zone,
    start: datetime,
    end: datetime,
    interval: Interval,
    now: datetime,
    *,
    timezone: str | None = None,
) -> MarketValue:
    """The market value of a system with a zone, as its endpoint answers it (reports call
    this for each of their systems). `timezone`: bucket on another zone's clock and calendar
    instead of the system's own (a report's chosen calendar)."""
    bucket_zone = timezone or system.timezone
    edges = widen_range(start, end, interval, ZoneInfo(bucket_zone)).edges()
    first, last = int(edges[0]), int(edges[-1])
    energy = (
        await quarter_hours(
            session,
            system,
            datetime.fromtimestamp(first, UTC),
            datetime.fromtimestamp(last, UTC),
            now,
        )
    ).energy_wh
    prices, source = await quarter_hour_prices(
        session, Environment(system.environment), zone, first, last
    )
    return MarketValue(
        system.id,
        zone.code,
        interval,
        bucket_zone,
        zone.currency,
        source,
        valued_buckets(energy, prices, edges),
    )


def valued_buckets(energy: FloatArray, prices: FloatArray, edges: IntArray) -> Valued:
    """Quarter-hours of energy × price (both from `edges[0]` to `edges[-1]`, NaN = none)
    summed into the buckets between `edges`, with the range's totals: the one valuation,
    of one system (`value_of`) or of each system of a portfolio."""
    first = int(edges[0])
    value = energy / WH_PER_MWH * prices  # NaN where either is missing
    valued = ~np.isnan(value)
    index = (edges[:-1] - first) // QUARTER_S

    bucket_energy = _sum_or_nan(energy, ~np.isnan(energy), index)
    bucket_value = _sum_or_nan(value, valued, index)
    priced_energy = np.add.reduceat(np.where(valued, energy, 0.0), index)
    # Volume-weighted price; a bucket that produced nothing (a night) has no volume to weigh
    # by, so it shows the time-weighted mean price instead of null.
    with np.errstate(invalid="ignore", divide="ignore"):
        bucket_price = np.where(
            priced_energy > 0,
            bucket_value / priced_energy * WH_PER_MWH,
            bucket_means(prices, edges),
        )

    total_energy = float(np.nansum(energy)) if (~np.isnan(energy)).any() else None
    total_value = float(value[valued].sum()) if valued.any() else None
    total_priced = float(energy[valued].sum())
    negative = valued & (prices < 0)
    sums = ValueSums(
        energy_wh=total_energy,
        priced_energy_wh=total_priced,
        value_eur=total_value,
        negative_price_energy_wh=float(energy[negative].sum()),
        negative_price_value_eur=float(value[negative].sum()),
        starts=np.arange(int(edges[0]), int(edges[-1]), QUARTER_S, dtype=np.int64),
        prices=prices,
    )
    totals = value_totals(sums, baseload_price(prices))
    return Valued(edges, bucket_energy, bucket_price, bucket_value, sums, totals)


def value_totals(sums: ValueSums, baseload: float | None) -> ValueTotals:
    """The section 6 figures of a market value, from raw sums."""
    capture = (
        sums.value_eur / sums.priced_energy_wh * WH_PER_MWH
        if sums.value_eur is not None and sums.priced_energy_wh > 0
        else None
    )
    rate = (
        capture / baseload
        if capture is not None and baseload is not None and baseload > 0
        else None
    )
    return ValueTotals(
        energy_wh=_round(sums.energy_wh, 3),
        value_eur=_round(sums.value_eur, 4),
        price_eur_per_mwh=_round(capture, 3),
        priced_energy_wh=round(sums.priced_energy_wh, 3),
        capture_price_eur_per_mwh=_round(capture, 3),
        baseload_price_eur_per_mwh=_round(baseload, 3),
        capture_rate=_round(rate, 4),
        negative_price_energy_wh=round(sums.negative_price_energy_wh, 3),
        negative_price_value_eur=round(sums.negative_price_value_eur, 4),
    )


def _round(value: float | None, decimals: int) -> float | None:
    return None if value is None else round(value, decimals)


# --- rendering ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValuedBucket:
    """One bucket of a market value as the body writes it: its `start` and `end` labels, its
    figures rounded as rendered (None where the body has `null`)."""

    start: str
    end: str
    start_s: int
    energy_wh: float | None
    price_eur_per_mwh: float | None
    value_eur: float | None


def _written(
    valued: Valued,
) -> tuple[list[str], list[float | None], list[float | None], list[float | None]]:
    """The bucket edges' labels and the figures as the API writes them: the energy and price
    rounded to 3 decimals, the value to 4, NaN as None."""
    return (
        iso_strings(valued.edges),
        rounded_or_none(valued.energy_wh, 3),
        rounded_or_none(valued.price_eur_per_mwh, 3),
        rounded_or_none(valued.value_eur, 4),
    )


def each_bucket(valued: Valued) -> list[ValuedBucket]:
    """Every bucket with the figures `bucket_items` writes for it, as values (what reports
    read, without a JSON round trip)."""
    stamps, energy_out, price_out, value_out = _written(valued)
    starts = valued.edges.tolist()
    return [
        ValuedBucket(stamps[i], stamps[i + 1], starts[i], energy_out[i], price_out[i], value_out[i])
        for i in range(len(energy_out))
    ]


def bucket_items(valued: Valued) -> list[dict[str, Any]]:
    """The buckets as the API writes them: `start`, `end`, the energy and price rounded to
    3 decimals, the value to 4, NaN as null."""
    stamps, energy_out, price_out, value_out = _written(valued)
    return [
        {
            "start": stamps[i],
            "end": stamps[i + 1],
            "energy_wh": energy_out[i],
            "price_eur_per_mwh": price_out[i],
            "value_eur": value_out[i],
        }
        for i in range(len(energy_out))
    ]


def edge_labels(valued: Valued) -> tuple[str, str]:
    """The widened range's `from` and `to`."""
    edges = valued.edges
    return iso_strings(edges[:1])[0], iso_strings(edges[-1:])[0]


def render(value: MarketValue) -> bytes:
    """The body of `GET /systems/{id}/market-value` (`prices.schemas.MarketValueSeries`)."""
    first, last = edge_labels(value.valued)
    return orjson.dumps(
        {
            "data": bucket_items(value.valued),
            "meta": {
                "system_id": value.system_id,
                "market_zone": value.market_zone,
                "interval": value.interval.value,
                "timezone": value.timezone,
                "from": first,
                "to": last,
                "currency": value.currency,
                "source": value.source,
                "totals": value.totals.to_api(),
            },
        }
    )
