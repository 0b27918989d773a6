"""Rules of the portfolio reads. Every number of a system is what its per-system endpoint
answers, because it is computed by that endpoint's own functions (`readings.service`
`time_range_of`/`readings_of_many`/`summary`, `prices.value.value_of`); this module only selects
the systems, checks the page's size and adds the fleet's totals up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.kit.grid import (
    Interval,
    TimeRange,
    bucket_count,
    iso_strings,
    parse_interval,
    parse_range,
    widen_range,
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
from solarapi.prices import value
from solarapi.prices.service import baseload_price
from solarapi.readings import service as readings
from solarapi.readings.rendering import ManyReadings, Totals
from solarapi.systems.repository import FleetMember

_UTC = ZoneInfo("UTC")


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
    system_totals: list[Totals]
    totals: FleetReadingsTotals
    fleet: Fleet[FleetMember]


def _sum_or_none(values: list[float | None], decimals: int = 3) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present), decimals) if present else None


async def fleet_readings(
    session: AsyncSession,
    principal: Principal,
    query: FleetQuery,
    *,
    from_text: str | None,
    to_text: str | None,
    interval_text: str | None,
    now: datetime,
) -> FleetReadings:
    interval = parse_interval(interval_text, default=Interval.DAY)
    start, end = parse_range(from_text, to_text, now)
    # 400 before 404: the range is checked on the UTC calendar before any system is read
    # (a system's calendar moves edges by hours: at most one bucket).
    widen_range(start, end, interval, _UTC)
    fleet = await select_members(session, principal, query)
    # Widened once per time zone (systems of one zone share the range and its buckets).
    by_zone: dict[str, TimeRange] = {}
    for system in fleet.systems:
        if system.timezone not in by_zone:
            by_zone[system.timezone] = readings.time_range_of(system, start, end, interval)
    counts = {
        zone: bucket_count(r.start_s, r.end_s, r.interval, r.tz) for zone, r in by_zone.items()
    }
    check_page_size(
        [counts[system.timezone] for system in fleet.on_page], query.page.limit, interval.value
    )
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
            _sum_or_none([system.energy_wh for system in totals]),
            sum(system.samples for system in totals),
            sum(system.expected_samples for system in totals),
            len(fleet.systems),
            sum(1 for system in totals if system.samples > 0),
        ),
        fleet,
    )


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """`GET /portfolio/summary`: each page system's `/systems/{id}/summary` object, and the
    totals of every matching system."""

    items: list[dict[str, Any]]
    totals: dict[str, Any]
    fleet: Fleet[SystemRecord]


_ENERGIES = ("energy_today_wh", "energy_month_wh", "energy_year_wh", "energy_lifetime_wh")


async def fleet_summary(
    session: AsyncSession, principal: Principal, query: FleetQuery, now: datetime
) -> FleetSummary:
    fleet = await select_fleet(session, principal, query)
    on_page = {system.id for system in fleet.on_page}
    items, totals = await summaries(session, fleet.systems, now)
    return FleetSummary([item for item in items if item["system_id"] in on_page], totals, fleet)


async def summaries(
    session: AsyncSession, systems: Sequence[ReadableSystem], now: datetime
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each system's `/systems/{id}/summary` object (with `system_id`) and the fleet's
    totals (also the dashboard overview's)."""
    items: list[dict[str, Any]] = []
    sums: dict[str, list[float | None]] = {name: [] for name in _ENERGIES}
    reporting_energy = reporting_capacity = 0.0
    reporting = 0
    for system in systems:
        one = await readings.summary(session, system, now)
        for name in _ENERGIES:
            sums[name].append(one[name])
        if one["energy_today_wh"] is not None:
            reporting += 1
            reporting_energy += one["energy_today_wh"]
            reporting_capacity += system.capacity_kwp
        items.append({"system_id": system.id, **one})
    totals: dict[str, Any] = {name: _sum_or_none(values) for name, values in sums.items()}
    totals["capacity_kwp"] = round(sum(system.capacity_kwp for system in systems), 3)
    totals["systems"] = len(systems)
    totals["systems_reporting_today"] = reporting
    totals["specific_yield_today_kwh_kwp"] = (
        round(reporting_energy / 1000.0 / reporting_capacity, 4) if reporting else None
    )
    return items, totals


@dataclass(frozen=True, slots=True)
class FleetValue:
    """`GET /portfolio/market-value`: per page system its market-value series (as
    `/systems/{id}/market-value` answers it; a system without a zone with null values), the
    totals of each zone and of all zones, over every matching system."""

    interval: Interval
    start: datetime
    end: datetime
    items: list[dict[str, Any]]
    zones: list[dict[str, Any]]
    totals: dict[str, Any]
    fleet: Fleet[SystemRecord]


_NO_VALUE: dict[str, Any] = {
    "energy_wh": None,
    "value_eur": None,
    "price_eur_per_mwh": None,
    "priced_energy_wh": None,
    "capture_price_eur_per_mwh": None,
    "baseload_price_eur_per_mwh": None,
    "capture_rate": None,
    "negative_price_energy_wh": None,
    "negative_price_value_eur": None,
}


def _zone_totals(sums: list[value.ValueSums], *, with_baseload: bool) -> dict[str, Any]:
    """The section 6 totals of several systems' sums: energies and values added up, the
    capture price of the total; the baseload price over every quarter-hour any of them
    covers (systems of one zone share its prices) when `with_baseload`."""
    energies = [s.energy_wh for s in sums if s.energy_wh is not None]
    values = [s.value_eur for s in sums if s.value_eur is not None]
    total = value.ValueSums(
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
    totals = value.value_totals(total, baseload)
    del totals["price_eur_per_mwh"]  # the capture price, under its own name here
    totals["systems"] = len(sums)
    return totals


async def fleet_market_value(
    session: AsyncSession,
    principal: Principal,
    query: FleetQuery,
    *,
    from_text: str | None,
    to_text: str | None,
    interval_text: str | None,
    now: datetime,
) -> FleetValue:
    interval = parse_interval(interval_text, default=Interval.DAY)
    start, end = parse_range(from_text, to_text, now)
    widen_range(start, end, interval, _UTC)  # 400 before 404, as in fleet_readings
    fleet = await select_fleet(session, principal, query)
    on_page = {system.id for system in fleet.on_page}
    ranges = {
        system.id: widen_range(start, end, interval, ZoneInfo(system.timezone))
        for system in fleet.systems
    }
    check_page_size(
        [
            bucket_count(r.start_s, r.end_s, r.interval, r.tz)
            for system_id, r in ranges.items()
            if system_id in on_page
        ],
        query.page.limit,
        interval.value,
    )
    items: list[dict[str, Any]] = []
    by_zone: dict[str, list[value.ValueSums]] = {}
    for system in fleet.systems:
        zone = ZONES.get(system.market_zone) if system.market_zone else None
        if zone is None:
            if system.id in on_page:
                edges = iso_strings(np.array([ranges[system.id].start_s, ranges[system.id].end_s]))
                items.append(
                    {
                        "system_id": system.id,
                        "market_zone": system.market_zone,
                        "timezone": system.timezone,
                        "from": edges[0],
                        "to": edges[1],
                        "currency": None,
                        "source": None,
                        "data": [],
                        "totals": dict(_NO_VALUE),
                    }
                )
            continue
        one = await value.value_of(session, system, zone, start, end, interval, now)
        by_zone.setdefault(zone.code, []).append(one.sums)
        if system.id in on_page:
            meta = one.body["meta"]
            items.append(
                {
                    "system_id": system.id,
                    "market_zone": zone.code,
                    "timezone": meta["timezone"],
                    "from": meta["from"],
                    "to": meta["to"],
                    "currency": meta["currency"],
                    "source": meta["source"],
                    "data": one.body["data"],
                    "totals": meta["totals"],
                }
            )
    zones = [
        {"zone": code, **_zone_totals(sums, with_baseload=True)}
        for code, sums in sorted(by_zone.items())
    ]
    every = [s for sums in by_zone.values() for s in sums]
    totals = _zone_totals(every, with_baseload=len(by_zone) == 1)
    return FleetValue(interval, start, end, items, zones, totals, fleet)
