"""Simulated day-ahead prices for the sandbox: deterministic, 15-minute, per bidding zone.

A price is a function of the zone and the quarter-hour alone, so any range gives the same
numbers in any process. Its parts, all in the zone's local time:

- a zone level (roughly the zone's recent average) × a seasonal factor (winter dearer) × a
  persistent daily anomaly (fuel and wind regimes last a few days);
- a daily demand shape with a morning peak around 08:00 and a higher evening peak around
  19:30, flatter and ~15 % cheaper on weekends;
- a solar dip around 13:00 whose depth grows with the zone's solar share, the season and the
  day's sunshine — deep enough on bright spring and summer days, above all on weekends, to
  push midday prices below zero, as in the real German and Dutch markets;
- a little quarter-hour noise. Prices are rounded to cents, as exchanges publish them.

Public holidays are not modelled. This is test data for integrations, not a forecast.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pandas as pd

from solarapi.kit.grid import QUARTER_S
from solarapi.kit.zones import ZONES
from solarapi.sandbox.cache import BoundedCache
from solarapi.sandbox.utc_months import gather_months, grid_range
from solarapi.sandbox.weather import daily_anomaly, seeded_normals

# A zone-month is ~24 KB; 360 months covers every zone for two years in ~9 MB per process.
MAX_CACHED_MONTHS = 360
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ZoneMarket:
    level_eur_per_mwh: float  # typical all-day average
    solar_share: float  # 0..1: how deep sunshine cuts the midday price


_MARKETS: dict[str, ZoneMarket] = {
    "NL": ZoneMarket(82.0, 0.9),
    "BE": ZoneMarket(80.0, 0.75),
    "DE-LU": ZoneMarket(78.0, 1.0),
    "FR": ZoneMarket(64.0, 0.6),
    "AT": ZoneMarket(86.0, 0.7),
    "CH": ZoneMarket(88.0, 0.5),
    "DK1": ZoneMarket(72.0, 0.55),
    "DK2": ZoneMarket(75.0, 0.45),
    "ES": ZoneMarket(62.0, 1.0),
    "PL": ZoneMarket(100.0, 0.55),
    "SE3": ZoneMarket(42.0, 0.2),
    "SE4": ZoneMarket(62.0, 0.3),
    "NO1": ZoneMarket(48.0, 0.15),
    "FI": ZoneMarket(40.0, 0.15),
    "IT-NORD": ZoneMarket(105.0, 0.55),
}
# A zone added to the zones table later still gets prices, at a middling level.
_DEFAULT_MARKET = ZoneMarket(75.0, 0.5)

_months: BoundedCache[tuple[str, int, int], FloatArray] = BoundedCache(MAX_CACHED_MONTHS)


def simulate_prices(zone: str, start: datetime, end: datetime) -> tuple[IntArray, FloatArray]:
    """Quarter-hour starts (epoch seconds) in [start, end) and their prices in EUR/MWh.

    `zone` is a code of `kit.zones.ZONES`; `start` and `end` are aware datetimes on the
    15-minute grid.
    """
    if zone not in ZONES:
        raise ValueError(f"unknown bidding zone {zone!r}")
    start_s, end_s = grid_range(start, end)
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    if starts.size == 0:
        return starts, np.zeros(0, dtype=np.float64)
    prices = gather_months(
        start_s, end_s, lambda year, month, lo, hi: _month_prices(zone, year, month, lo, hi)
    )
    return starts, prices


def clear_cache() -> None:
    _months.clear()


def _month_prices(
    zone: str, year: int, month: int, month_start_s: int, month_end_s: int
) -> FloatArray:
    key = (zone, year, month)
    cached = _months.get(key)
    if cached is not None:
        return cached
    prices = quarter_hour_prices(
        zone, np.arange(month_start_s, month_end_s, QUARTER_S, dtype=np.int64)
    )
    prices.flags.writeable = False
    _months.put(key, prices)
    return prices


def quarter_hour_prices(zone: str, starts: IntArray) -> FloatArray:
    """The price of each quarter-hour starting at `starts` (epoch seconds), uncached."""
    market = _MARKETS.get(zone, _DEFAULT_MARKET)
    times = pd.DatetimeIndex(pd.to_datetime(starts, unit="s", utc=True)).as_unit("ns")
    local_seconds = (
        times.tz_convert(ZONES[zone].timezone).tz_localize(None).as_unit("s").asi8.astype(np.int64)
    )
    local_day = local_seconds // 86400
    # Hour of the quarter-hour's midpoint, local wall clock.
    hour: FloatArray = ((local_seconds - local_day * 86400 + QUARTER_S / 2) / 3600.0).astype(
        np.float64
    )
    weekend = ((local_day + 3) % 7) >= 5  # 1970-01-01 was a Thursday (Monday = 0)
    day_of_year = times.tz_convert(ZONES[zone].timezone).day_of_year.to_numpy()

    unique_days, inverse = np.unique(local_day, return_inverse=True)
    ordinal = unique_days + 719163  # date(1970, 1, 1).toordinal()
    regime = daily_anomaly(f"prices|{zone}", ordinal)[inverse]
    sunshine = 1.0 / (1.0 + np.exp(-1.6 * daily_anomaly(f"prices-sun|{zone}", ordinal)))[inverse]
    noise = np.empty(starts.shape, dtype=np.float64)
    step = ((local_seconds - local_day * 86400) // QUARTER_S).astype(np.int64)
    for i, day in enumerate(ordinal):
        mask = inverse == i
        # 100 quarter-hours covers the longest (DST fall-back) local day.
        noise[mask] = seeded_normals(f"solarapi-sandbox|prices-qh|{zone}|{int(day)}", 100)[
            step[mask]
        ]

    season = 1.0 + 0.18 * np.cos(2 * np.pi * (day_of_year - 15) / 365.25)
    level = market.level_eur_per_mwh * season * (1.0 + 0.15 * regime) * np.where(weekend, 0.85, 1.0)
    morning = np.where(weekend, 0.12, 0.28) * _bump(hour, 8.0, 1.5)
    evening = 0.45 * _bump(hour, 19.5, 2.0)
    daytime = 0.15 * _bump(hour, 13.0, 4.0)
    shape = 0.68 + morning + evening + daytime

    # Sun strength over the year: strong from April to August, weak in winter.
    sun_season = 0.15 + 0.85 * np.clip(np.cos(2 * np.pi * (day_of_year - 172) / 365.25), 0, 1)
    dip = (
        1.25
        * market.level_eur_per_mwh
        * market.solar_share
        * sun_season
        * sunshine
        * _bump(hour, 13.0, 2.2)
    )
    price = level * shape - dip + 0.03 * market.level_eur_per_mwh * noise
    rounded: FloatArray = np.round(price, 2)
    return rounded


def _bump(hour: FloatArray, centre: float, width: float) -> FloatArray:
    result: FloatArray = np.exp(-0.5 * ((hour - centre) / width) ** 2)
    return result
