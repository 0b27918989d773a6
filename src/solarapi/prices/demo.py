"""Demo data of the prices area: a year of day-ahead prices for the zones of the demo
accounts' live systems (idempotent, and one aggregate query when already present).

Prices are live market data shared by every account, so they are stored like an import
(source `simulated`) and only where a zone has no price yet: a real import is never
overwritten, and a later import replaces demo prices like any other.

They come from the sandbox price model, `solarapi.sandbox.prices.simulate_prices`, when it
is installed. Without it, a stand-in (`_stand_in_prices`): a seasonal base, a morning and an
evening peak, and a midday solar dip that goes below zero on some sunny summer days, varied
per day by a hash of zone and date. It looks like a day-ahead curve; it is not a market model.
As published, prices before 2025-10-01 are stored hourly and from then on per quarter-hour.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import QUARTER_S, FloatArray, IntArray, local_date, local_midnight
from solarapi.kit.plans import Plan
from solarapi.kit.zones import ZONES, Zone
from solarapi.models.prices import MarketPrice
from solarapi.models.systems import System
from solarapi.prices import repository
from solarapi.prices.cache import expand_to_quarters
from solarapi.prices.rows import PriceRow

DEMO_DAYS = 365
# The first delivery day of 15-minute day-ahead products (00:00 CET on 2025-10-01).
QUARTER_HOUR_MARKET_FROM = int(datetime(2025, 9, 30, 22, tzinfo=UTC).timestamp())


async def add_demo_data(session: AsyncSession, account_id: str, plan: Plan, now: datetime) -> None:
    zones = (
        await session.execute(
            select(System.market_zone)
            .distinct()
            .where(
                System.account_id == account_id,
                System.environment == "live",
                System.market_zone.is_not(None),
            )
        )
    ).scalars()
    for code in sorted(z for z in zones if z in ZONES):
        await ensure_demo_prices(session, ZONES[code], now)


def price_origin() -> str:
    """Where demo prices come from, in words (never market data)."""
    if importlib.util.find_spec("solarapi.sandbox.prices") is not None:
        return "simulated by the sandbox price model (solarapi.sandbox.prices), not market data"
    return "a simulated stand-in curve (solarapi.prices.demo), not market data"


def demo_range(zone: Zone, now: datetime) -> tuple[int, int]:
    """A year of whole local days up to the end of tomorrow (day-ahead prices exist for it)."""
    tz = ZoneInfo(zone.timezone)
    today = local_date(int(now.timestamp()), tz)
    return (
        local_midnight(today - timedelta(days=DEMO_DAYS), tz),
        local_midnight(today + timedelta(days=2), tz),
    )


async def ensure_demo_prices(session: AsyncSession, zone: Zone, now: datetime) -> int:
    """Fill the zone's unpriced quarter-hours of the demo range; returns rows stored."""
    start_s, end_s = demo_range(zone, now)
    covered = (
        await session.execute(
            select(func.coalesce(func.sum(MarketPrice.resolution_s), 0)).where(
                MarketPrice.zone == zone.code,
                MarketPrice.start >= datetime.fromtimestamp(start_s, UTC),
                MarketPrice.start < datetime.fromtimestamp(end_s, UTC),
            )
        )
    ).scalar_one()
    if int(covered) >= end_s - start_s:
        return 0
    stored = await repository.read_prices(session, zone.code, start_s, end_s)
    existing = expand_to_quarters(stored.starts, stored.resolution_s, stored.prices, start_s, end_s)
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    prices = simulated_prices(zone, starts)
    rows = _rows_to_store(starts, prices, np.isnan(existing))
    await repository.insert_rows(session, zone.code, rows, "simulated", now)
    if rows:
        await repository.bump_zone_version(session, zone.code, now)
    return len(rows)


def _rows_to_store(
    starts: IntArray, prices: FloatArray, missing: npt.NDArray[np.bool_]
) -> list[PriceRow]:
    """Hourly rows (the mean of their quarter-hours) before the 15-minute market, quarter-hour
    rows after it, for the missing quarter-hours only."""
    rows: list[PriceRow] = []
    i = 0
    count = len(starts)
    while i < count:
        start = int(starts[i])
        whole_hour = (
            start < QUARTER_HOUR_MARKET_FROM
            and start % 3600 == 0
            and i + 4 <= count
            and bool(missing[i : i + 4].all())
        )
        if whole_hour:
            rows.append(PriceRow(start, 3600, round(float(prices[i : i + 4].mean()), 2)))
            i += 4
            continue
        if missing[i]:
            rows.append(PriceRow(start, QUARTER_S, round(float(prices[i]), 2)))
        i += 1
    return rows


def simulated_prices(zone: Zone, starts: IntArray) -> FloatArray:
    """Prices for the quarter-hours starting at `starts`: the sandbox model, else the stand-in."""
    try:
        # start-up: the model pulls in pandas (~0.7 s to import, measured); only demo data
        # needs it.
        from solarapi.sandbox.prices import simulate_prices  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return _stand_in_prices(zone, starts)
    first = datetime.fromtimestamp(int(starts[0]), UTC)
    end = datetime.fromtimestamp(int(starts[-1]) + QUARTER_S, UTC)
    model_starts, model_prices = simulate_prices(zone.code, first, end)
    prices = np.full(len(starts), np.nan)
    index = (np.asarray(model_starts, dtype=np.int64) - int(starts[0])) // QUARTER_S
    inside = (index >= 0) & (index < len(starts))
    prices[index[inside]] = np.asarray(model_prices, dtype=np.float64)[inside]
    if np.isnan(prices).any():  # a model that skips quarter-hours: fill from the stand-in
        gaps = np.isnan(prices)
        prices[gaps] = _stand_in_prices(zone, starts[gaps])
    return prices


def _stand_in_prices(zone: Zone, starts: IntArray) -> FloatArray:
    tz = ZoneInfo(zone.timezone)
    out = np.empty(len(starts))
    day_factor: dict[str, float] = {}
    for i, start in enumerate(starts.tolist()):
        local = datetime.fromtimestamp(start, tz)
        key = local.date().isoformat()
        if key not in day_factor:
            digest = hashlib.sha256(f"{zone.code}:{key}".encode()).digest()
            day_factor[key] = digest[0] / 255.0  # 0 = sunny and windy, 1 = dull and still
        sunny = 1.0 - day_factor[key]
        hour = local.hour + local.minute / 60
        season = math.cos((local.timetuple().tm_yday - 15) / 365.25 * 2 * math.pi)  # 1 = winter
        base = 75 + 25 * season + 20 * day_factor[key]
        peaks = 35 * math.exp(-((hour - 8) ** 2) / 3) + 55 * math.exp(-((hour - 19) ** 2) / 4)
        solar_dip = (1 - season) * sunny * 70 * math.exp(-((hour - 13) ** 2) / 8)
        night = -15 * math.exp(-((hour - 3) ** 2) / 6)
        out[i] = base + peaks - solar_dip + night
    return out
