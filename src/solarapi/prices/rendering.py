"""The typed answers of the price queries and their one JSON rendering.

`render_market_prices` writes the body of `GET /market-prices` (documented by
`prices.schemas.PriceSeries`), `render_zones` the body of `GET /market-prices/zones`
(`prices.schemas.ZoneList`). Prices are rounded to 3 decimals here, at the edge; a bucket or
a total without a price is `null`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import orjson

from solarapi.kit.grid import FloatArray, Interval, TimeRange, iso_strings
from solarapi.kit.zones import Zone
from solarapi.prices.price_rows import PriceSource


@dataclass(frozen=True, slots=True)
class PriceTotals:
    """`meta.totals` of `/market-prices`: over the priced quarter-hours of the widened range,
    unrounded (None: no quarter-hour has a price)."""

    mean_price_eur_per_mwh: float | None  # the baseload price
    min_price_eur_per_mwh: float | None
    max_price_eur_per_mwh: float | None
    priced_quarter_hours: int
    negative_quarter_hours: int


@dataclass(frozen=True, slots=True)
class MarketPrices:
    """Prices of a zone in the buckets of `time_range` (the request's range widened to the
    grid): what `GET /market-prices` answers."""

    zone: Zone
    time_range: TimeRange
    bucket_means: FloatArray  # per bucket, unrounded; NaN without a price
    source: PriceSource | None  # the source covering most of the range; None without a price
    totals: PriceTotals

    @property
    def interval(self) -> Interval:
        return self.time_range.interval


def render_market_prices(prices: MarketPrices) -> bytes:
    stamps = iso_strings(prices.time_range.edges())
    means = rounded_or_none(prices.bucket_means, 3)
    totals = prices.totals
    return orjson.dumps(
        {
            "data": [
                {"start": stamps[i], "end": stamps[i + 1], "price_eur_per_mwh": means[i]}
                for i in range(len(means))
            ],
            "meta": {
                "zone": prices.zone.code,
                "interval": prices.interval.value,
                "from": stamps[0],
                "to": stamps[-1],
                "currency": prices.zone.currency,
                "unit": "MWh",
                "source": prices.source,
                "totals": {
                    "mean_price_eur_per_mwh": _rounded_one(totals.mean_price_eur_per_mwh),
                    "min_price_eur_per_mwh": _rounded_one(totals.min_price_eur_per_mwh),
                    "max_price_eur_per_mwh": _rounded_one(totals.max_price_eur_per_mwh),
                    "priced_quarter_hours": totals.priced_quarter_hours,
                    "negative_quarter_hours": totals.negative_quarter_hours,
                },
            },
        }
    )


def render_zones(zones: Iterable[Zone]) -> bytes:
    return orjson.dumps(
        {
            "data": [
                {
                    "code": zone.code,
                    "name": zone.name,
                    "eic": zone.eic,
                    "timezone": zone.timezone,
                    "currency": zone.currency,
                }
                for zone in zones
            ]
        }
    )


def rounded_or_none(values: FloatArray, decimals: int) -> list[float | None]:
    rounded: list[float] = np.round(values, decimals).tolist()
    return [None if value != value else value for value in rounded]  # NaN != NaN


def _rounded_one(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
