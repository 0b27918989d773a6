"""Demo data of the prices area: a year of day-ahead prices for the zones of the demo
accounts' live systems (idempotent, and one aggregate query when already present).

Prices are live market data shared by every account, so they are stored like an import
(source `simulated`) and only where a zone has no price yet: a real import is never
overwritten, and a later import replaces demo prices like any other.

They come from the sandbox price model, `solarapi.sandbox.prices.simulate_prices`.
As published, prices before 2025-10-01 are stored hourly and from then on per quarter-hour.
"""

from __future__ import annotations

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
from solarapi.prices.price_rows import PriceRow

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


# What the demo prices are, for the `solarapi demo` output.
PRICE_ORIGIN = "simulated by the sandbox price model (solarapi.sandbox.prices), not market data"


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
    """Prices for the quarter-hours starting at `starts` (contiguous), from the sandbox
    price model, which covers every quarter-hour."""
    # start-up: the model pulls in pandas (~0.7 s to import, measured); only demo data
    # needs it.
    from solarapi.sandbox.prices import simulate_prices

    first = datetime.fromtimestamp(int(starts[0]), UTC)
    end = datetime.fromtimestamp(int(starts[-1]) + QUARTER_S, UTC)
    _, prices = simulate_prices(zone.code, first, end)
    return np.asarray(prices, dtype=np.float64)
