"""Rules of the portfolio reads. Every number of a system is what its per-system endpoint
answers, because it is computed by that endpoint's own functions (`readings.service`
`time_ranges_by_zone`/`readings_of_many`/`summaries_of_many`/`quarter_hours_of_many`,
`prices.market_value.valued_buckets`); this module only selects the systems, checks the
page's size, reads each source once for all of them and adds the fleet's totals up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.kit.grid import (
    IntArray,
    Interval,
    SeriesQuery,
)
from solarapi.kit.zones import ZONES
from solarapi.models.systems import ReadableSystem, SystemRecord
from solarapi.portfolio.fleet import (
    Fleet,
    FleetQuery,
    check_page_size,
    select_fleet,
    select_members,
)
from solarapi.prices.market_value import MarketValue, ValueSums, value_totals, valued_buckets
from solarapi.prices.service import ZonePrices, baseload_price, zone_prices
from solarapi.readings import service as readings
from solarapi.readings.rendering import ManyReadings, ManyTotals
from solarapi.readings.service import Summary
from solarapi.systems.repository import FleetMember


@dataclass(frozen=True, slots=True)
class FleetReadingsTotals:
    energy_wh: float | None
    samples: int
    expected_samples: int
    systems: int
    systems_with_data: int


@dataclass(frozen=True, slots=True)
class FleetReadings:
    """`GET /portfolio/readings`: every matching system's readings (the page's are
    rendered), each system's totals and the fleet's, and the request's range as given."""

    interval: Interval
    start: datetime
    end: datetime
    readings: ManyReadings
    system_totals: ManyTotals
    totals: FleetReadingsTotals
    fleet: Fleet[FleetMember]


def _sum_or_none(values: list[float | None], decimals: int = 3) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present), decimals) if present else None


async def fleet_readings(
    session: AsyncSession,
    principal: Principal,
    query: FleetQuery,
    series: SeriesQuery,
    now: datetime,
) -> FleetReadings:
    start, end, interval = series.start, series.end, series.interval
    # 400 before 404: the range is checked before any system is read, but whether it is
    # over the cap is the systems' grids' to say (`readings.over_cap_on_utc`).
    refused = readings.over_cap_on_utc(series)
    fleet = await select_members(session, principal, query)
    by_zone = readings.time_ranges_by_zone(
        [system.timezone for system in fleet.systems], series, refused
    )
    # (The edges are needed for the sums anyway, and kept with the range: counted from them
    # rather than by `bucket_count`, which makes a calendar's edges once more; `widen_range`
    # has refused a range over the cap, where the two would differ.)
    counts = {zone: len(r.edges()) - 1 for zone, r in by_zone.items()}
    check_page_size(
        [counts[system.timezone] for system in fleet.on_page], query.page.limit, interval.value
    )
    fleet.check_found()
    # Every matching system's rows are read and summed, not only the page's: the totals
    # cover them all (in one read per source, so that costs little more than the page).
    many = await readings.readings_of_many(
        session, fleet.systems, [by_zone[system.timezone] for system in fleet.systems], now
    )
    totals = many.totals()
    return FleetReadings(
        interval,
        start,
        end,
        many,
        totals,
        FleetReadingsTotals(
            _sum_or_none(totals.energy_wh),
            sum(totals.samples),
            sum(totals.expected_samples),
            len(fleet.systems),
            len(totals.samples) - totals.samples.count(0),  # (counts: none below 0)
        ),
        fleet,
    )


@dataclass(frozen=True, slots=True)
class SummaryTotals:
    """`meta.totals` of `GET /portfolio/summary` (and the dashboard overview's)."""

    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    capacity_kwp: float
    systems: int
    systems_reporting_today: int
    specific_yield_today_kwh_kwp: float | None

    def to_api(self) -> dict[str, Any]:
        return {
            "energy_today_wh": self.energy_today_wh,
            "energy_month_wh": self.energy_month_wh,
            "energy_year_wh": self.energy_year_wh,
            "energy_lifetime_wh": self.energy_lifetime_wh,
            "capacity_kwp": self.capacity_kwp,
            "systems": self.systems,
            "systems_reporting_today": self.systems_reporting_today,
            "specific_yield_today_kwh_kwp": self.specific_yield_today_kwh_kwp,
        }


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """`GET /portfolio/summary`: each page system's `/systems/{id}/summary` (with its id),
    and the totals of every matching system."""

    items: list[tuple[str, Summary]]
    totals: SummaryTotals
    fleet: Fleet[SystemRecord]


async def fleet_summary(
    session: AsyncSession, principal: Principal, query: FleetQuery, now: datetime
) -> FleetSummary:
    fleet = await select_fleet(session, principal, query)
    fleet.check_found()
    found, totals = await summaries(session, fleet.systems, now)
    page = fleet.page
    items = [(system.id, one) for system, one in zip(fleet.systems, found, strict=True)]
    return FleetSummary(items[page.offset : page.offset + page.limit], totals, fleet)


async def summaries(
    session: AsyncSession, systems: Sequence[ReadableSystem], now: datetime
) -> tuple[list[Summary], SummaryTotals]:
    """Each system's `/systems/{id}/summary` (`readings.service.summaries_of_many`: one read
    per source for all of them) and the fleet's totals (also the dashboard overview's)."""
    found = await readings.summaries_of_many(session, systems, now)
    reporting_energy = reporting_capacity = 0.0
    reporting = 0
    for system, one in zip(systems, found, strict=True):
        if one.energy_today_wh is not None:
            reporting += 1
            reporting_energy += one.energy_today_wh
            reporting_capacity += system.capacity_kwp
    totals = SummaryTotals(
        energy_today_wh=_sum_or_none([one.energy_today_wh for one in found]),
        energy_month_wh=_sum_or_none([one.energy_month_wh for one in found]),
        energy_year_wh=_sum_or_none([one.energy_year_wh for one in found]),
        energy_lifetime_wh=_sum_or_none([one.energy_lifetime_wh for one in found]),
        capacity_kwp=round(sum(system.capacity_kwp for system in systems), 3),
        systems=len(systems),
        systems_reporting_today=reporting,
        specific_yield_today_kwh_kwp=(
            round(reporting_energy / 1000.0 / reporting_capacity, 4) if reporting else None
        ),
    )
    return found, totals


@dataclass(frozen=True, slots=True)
class ZoneTotals:
    """The section 6 totals of several systems' market values (`meta.zones[]` without its
    `zone`, and `meta.totals`)."""

    energy_wh: float | None
    value_eur: float | None
    priced_energy_wh: float
    capture_price_eur_per_mwh: float | None
    baseload_price_eur_per_mwh: float | None
    capture_rate: float | None
    negative_price_energy_wh: float
    negative_price_value_eur: float
    systems: int

    def to_api(self) -> dict[str, Any]:
        return {
            "energy_wh": self.energy_wh,
            "value_eur": self.value_eur,
            "priced_energy_wh": self.priced_energy_wh,
            "capture_price_eur_per_mwh": self.capture_price_eur_per_mwh,
            "baseload_price_eur_per_mwh": self.baseload_price_eur_per_mwh,
            "capture_rate": self.capture_rate,
            "negative_price_energy_wh": self.negative_price_energy_wh,
            "negative_price_value_eur": self.negative_price_value_eur,
            "systems": self.systems,
        }


@dataclass(frozen=True, slots=True)
class SystemValue:
    """A page system of `GET /portfolio/market-value`: its market value as
    `/systems/{id}/market-value` answers it, or (`value` None: no market zone) its widened
    range only."""

    system_id: str
    market_zone: str | None
    timezone: str
    edges: IntArray  # of its widened range (the buckets it would have)
    value: MarketValue | None


@dataclass(frozen=True, slots=True)
class FleetValue:
    """`GET /portfolio/market-value`: per page system its market value, the totals of each
    zone and of all zones, over every matching system."""

    interval: Interval
    start: datetime
    end: datetime
    items: list[SystemValue]
    zones: list[tuple[str, ZoneTotals]]
    totals: ZoneTotals
    fleet: Fleet[SystemRecord]


def _zone_totals(sums: list[ValueSums], *, with_baseload: bool) -> ZoneTotals:
    """The section 6 totals of several systems' sums: energies and values added up, the
    capture price of the total; the baseload price over every quarter-hour any of them
    covers (systems of one zone share its prices) when `with_baseload`."""
    energies = [s.energy_wh for s in sums if s.energy_wh is not None]
    values = [s.value_eur for s in sums if s.value_eur is not None]
    total = ValueSums(
        energy_wh=sum(energies) if energies else None,
        priced_energy_wh=sum(s.priced_energy_wh for s in sums),
        value_eur=sum(values) if values else None,
        negative_price_energy_wh=sum(s.negative_price_energy_wh for s in sums),
        negative_price_value_eur=sum(s.negative_price_value_eur for s in sums),
        starts=np.empty(0, dtype=np.int64),
        prices=np.empty(0),
    )
    baseload: float | None = None
    if with_baseload and sums:
        starts = np.concatenate([s.starts for s in sums])
        prices = np.concatenate([s.prices for s in sums])
        _, first = np.unique(starts, return_index=True)
        baseload = baseload_price(prices[first])
    one = value_totals(total, baseload)
    return ZoneTotals(
        energy_wh=one.energy_wh,
        value_eur=one.value_eur,
        priced_energy_wh=one.priced_energy_wh,
        capture_price_eur_per_mwh=one.capture_price_eur_per_mwh,
        baseload_price_eur_per_mwh=one.baseload_price_eur_per_mwh,
        capture_rate=one.capture_rate,
        negative_price_energy_wh=one.negative_price_energy_wh,
        negative_price_value_eur=one.negative_price_value_eur,
        systems=len(sums),
    )


async def fleet_market_value(
    session: AsyncSession,
    principal: Principal,
    query: FleetQuery,
    series: SeriesQuery,
    now: datetime,
) -> FleetValue:
    start, end, interval = series.start, series.end, series.interval
    refused = readings.over_cap_on_utc(series)  # 400 before 404, as in fleet_readings
    fleet = await select_fleet(session, principal, query)
    by_timezone = {
        timezone: time_range.edges()
        for timezone, time_range in readings.time_ranges_by_zone(
            [system.timezone for system in fleet.systems], series, refused
        ).items()
    }
    # A system without a market zone is listed with no buckets (`data: []`): it takes none
    # of the page's cap.
    check_page_size(
        [
            len(by_timezone[system.timezone]) - 1 if system.market_zone is not None else 0
            for system in fleet.on_page
        ],
        query.page.limit,
        interval.value,
    )
    fleet.check_found()
    priced = [
        (system, ZONES[system.market_zone])
        for system in fleet.systems
        if system.market_zone is not None and system.market_zone in ZONES
    ]
    # One read per source for every priced system: their stored quarter-hours in one
    # statement, each zone's prices once over the union of its systems' ranges.
    ranges = [
        (int(by_timezone[s.timezone][0]), int(by_timezone[s.timezone][-1])) for s, _ in priced
    ]
    energies = await readings.quarter_hours_of_many(
        session, [system for system, _ in priced], ranges, now
    )
    prices: dict[str, ZonePrices] = {}
    for code in sorted({zone.code for _, zone in priced}):
        spans = [r for (_, zone), r in zip(priced, ranges, strict=True) if zone.code == code]
        prices[code] = await zone_prices(
            session,
            principal.environment,
            ZONES[code],
            min(lo for lo, _ in spans),
            max(hi for _, hi in spans),
        )
    values: dict[str, MarketValue] = {}
    by_zone: dict[str, list[ValueSums]] = {}
    for (system, zone), (lo, hi), energy in zip(priced, ranges, energies, strict=True):
        zone_prices_of, source = prices[zone.code].between(lo, hi)
        one = MarketValue(
            system.id,
            zone.code,
            interval,
            system.timezone,
            zone.currency,
            source,
            valued_buckets(energy.energy_wh, zone_prices_of, by_timezone[system.timezone]),
        )
        values[system.id] = one
        by_zone.setdefault(zone.code, []).append(one.sums)
    items = [
        SystemValue(
            system.id,
            system.market_zone,
            system.timezone,
            by_timezone[system.timezone],
            values.get(system.id),
        )
        for system in fleet.on_page
    ]
    zones = [
        (code, _zone_totals(sums, with_baseload=True)) for code, sums in sorted(by_zone.items())
    ]
    every = [s for sums in by_zone.values() for s in sums]
    totals = _zone_totals(every, with_baseload=len(by_zone) == 1)
    return FleetValue(interval, start, end, items, zones, totals, fleet)
