"""Production and market value reports: one row per system and bucket, from the same service
functions the API answers `GET /systems/{id}/readings` and `/market-value` with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models.reports import ReportKind
from solarapi.models.systems import System
from solarapi.prices.value import priced_zone, value_of
from solarapi.readings.service import aggregate
from solarapi.reports.content import (
    WH_PER_KWH,
    Cell,
    Chart,
    ReportContent,
    ReportContext,
    Table,
    add_details,
    add_values,
    axis_time,
    bar_days,
    bucket_key,
    coverage_ratio,
    facts,
    kwh,
    max_value,
    percent,
    period_label,
)

PRODUCTION_COLUMNS = [
    "system_id",
    "system_name",
    "timezone",
    "bucket_start_utc",
    "bucket_end_utc",
    "period_local",
    "energy_wh",
    "power_avg_w",
    "power_max_w",
    "samples",
    "expected_samples",
    "coverage_ratio",
]


@dataclass(slots=True)
class _Bucket:
    energy_wh: float | None = None
    power_max_w: float | None = None
    samples: int = 0
    expected: int = 0
    value_eur: float | None = None
    priced_energy_wh: float = 0.0


@dataclass(slots=True)
class _Gathered:
    """What the per-system loop collects for the tables after it."""

    per_bucket: dict[datetime, _Bucket] = field(default_factory=dict)
    summary: list[list[Cell]] = field(default_factory=list)
    details: list[Table] = field(default_factory=list)
    total_rows: int = 0


async def production(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    content = ReportContent(
        ReportKind.PRODUCTION.heading, facts(context, systems), list(PRODUCTION_COLUMNS)
    )
    gathered = _Gathered()
    for system in systems:
        readings = await aggregate(
            session,
            system,
            context.start,
            context.end,
            context.interval,
            context.now,
            timezone=context.calendar.bucket_zone(system.timezone),
        )
        body = readings.to_api()
        detail_rows = _production_buckets(content, context, system, body["data"], gathered)
        totals = body["meta"]["totals"]
        energy = totals["energy_wh"]
        gathered.summary.append(
            [
                system.name,
                system.capacity_kwp,
                kwh(energy),
                kwh(totals["power_max_w"]),
                percent(coverage_ratio(totals["samples"], totals["expected_samples"])),
                None if energy is None else energy / WH_PER_KWH / system.capacity_kwp,
            ]
        )
        gathered.details.append(
            Table(
                f"{system.name}, {system.timezone}",
                [
                    "Period",
                    "Energy (kWh)",
                    "Avg power (kW)",
                    "Peak power (kW)",
                    "Readings",
                    "Coverage",
                ],
                detail_rows,
            )
        )
    _production_tables(content, context, gathered)
    add_details(content, gathered.details, gathered.total_rows)
    content.notes.append(
        "Energy is the sum of the quarter-hour readings of each bucket; a bucket without "
        "readings is empty, never zero. Coverage is readings present ÷ readings expected."
    )
    return content


def _production_buckets(
    content: ReportContent,
    context: ReportContext,
    system: System,
    buckets: list[dict[str, Any]],
    gathered: _Gathered,
) -> list[list[Cell]]:
    """Adds one system's buckets to the all-systems totals and, for a CSV, to its rows;
    returns the system's PDF table rows (none for a CSV)."""
    interval = context.interval
    zone = context.calendar.bucket_zone(system.timezone)
    tz = ZoneInfo(zone)
    detail_rows: list[list[Cell]] = []
    for bucket in buckets:
        key = bucket_key(bucket["start"], interval, tz)
        label = period_label(key, interval, context.tz)
        coverage = coverage_ratio(bucket["samples"], bucket["expected_samples"])
        shared = gathered.per_bucket.setdefault(key, _Bucket())
        shared.energy_wh = add_values(shared.energy_wh, bucket["energy_wh"])
        shared.power_max_w = max_value(shared.power_max_w, bucket["power_max_w"])
        shared.samples += bucket["samples"]
        shared.expected += bucket["expected_samples"]
        gathered.total_rows += 1
        if context.wants_csv:
            content.csv_rows.append(
                [
                    system.id,
                    system.name,
                    zone,  # the zone of this row's buckets and period_local
                    bucket["start"],
                    bucket["end"],
                    label,
                    bucket["energy_wh"],
                    bucket["power_avg_w"],
                    bucket["power_max_w"],
                    bucket["samples"],
                    bucket["expected_samples"],
                    coverage,
                ]
            )
            continue
        detail_rows.append(
            [
                label,
                kwh(bucket["energy_wh"]),
                kwh(bucket["power_avg_w"]),
                kwh(bucket["power_max_w"]),
                f"{bucket['samples']}/{bucket['expected_samples']}",
                percent(coverage),
            ]
        )
    return detail_rows


def _production_tables(content: ReportContent, context: ReportContext, gathered: _Gathered) -> None:
    """The chart and the all-systems tables."""
    interval = context.interval
    per_bucket = gathered.per_bucket
    keys = sorted(per_bucket)
    content.chart = Chart(
        f"Production per {interval.label}, all systems",
        "Energy (kWh)",
        [axis_time(key, interval, context.tz) for key in keys],
        [kwh(per_bucket[key].energy_wh) for key in keys],
        bar_days(interval),
        [period_label(key, interval, context.tz) for key in keys],
    )
    content.tables.append(
        Table(
            "Systems",
            [
                "System",
                "Capacity (kWp)",
                "Energy (kWh)",
                "Peak power (kW)",
                "Coverage",
                "Yield (kWh/kWp)",
            ],
            [*gathered.summary, _production_total(gathered)],
        )
    )
    rows: list[list[Cell]] = [
        [
            period_label(key, interval, context.tz),
            kwh(per_bucket[key].energy_wh),
            kwh(per_bucket[key].power_max_w),
            f"{per_bucket[key].samples}/{per_bucket[key].expected}",
            percent(coverage_ratio(per_bucket[key].samples, per_bucket[key].expected)),
        ]
        for key in keys
    ]
    samples = sum(bucket.samples for bucket in per_bucket.values())
    expected = sum(bucket.expected for bucket in per_bucket.values())
    peaks = [b.power_max_w for b in per_bucket.values() if b.power_max_w is not None]
    total = _total_row("Total", rows, [1])
    total[2] = kwh(max(peaks)) if peaks else None
    total[3] = f"{samples}/{expected}"
    total[4] = percent(coverage_ratio(samples, expected))
    content.tables.append(
        Table(
            f"Production per {interval.label}, all systems",
            ["Period", "Energy (kWh)", "Peak power (kW)", "Readings", "Coverage"],
            [*rows, total],
        )
    )


def _production_total(gathered: _Gathered) -> list[Cell]:
    total = _total_row("Total", gathered.summary, [1, 2])
    peaks = [b.power_max_w for b in gathered.per_bucket.values() if b.power_max_w is not None]
    total[3] = kwh(max(peaks)) if peaks else None
    samples = sum(bucket.samples for bucket in gathered.per_bucket.values())
    expected = sum(bucket.expected for bucket in gathered.per_bucket.values())
    total[4] = percent(coverage_ratio(samples, expected))
    energy, capacity = total[2], total[1]
    total[5] = (
        energy / capacity
        if isinstance(energy, float) and isinstance(capacity, float) and capacity
        else None
    )
    return total


# --- market value -------------------------------------------------------------------------


MARKET_VALUE_COLUMNS = [
    "system_id",
    "system_name",
    "market_zone",
    "bucket_start_utc",
    "bucket_end_utc",
    "period_local",
    "energy_wh",
    "price_eur_per_mwh",
    "value_eur",
]


async def market_value(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    content = ReportContent(
        ReportKind.MARKET_VALUE.heading, facts(context, systems), list(MARKET_VALUE_COLUMNS)
    )
    gathered = _Gathered()
    for system in systems:
        valued = await value_of(
            session,
            system,
            priced_zone(system),  # 409 (the report fails) if it lost its zone since the POST
            context.start,
            context.end,
            context.interval,
            context.now,
            timezone=context.calendar.bucket_zone(system.timezone),
        )
        body = valued.body
        detail_rows = _market_value_buckets(content, context, system, body["data"], gathered)
        totals = body["meta"]["totals"]
        gathered.summary.append(
            [
                system.name,
                system.market_zone,
                kwh(totals["energy_wh"]),
                totals["value_eur"],
                totals["price_eur_per_mwh"],
            ]
        )
        gathered.details.append(
            Table(
                f"{system.name}, zone {system.market_zone}",
                ["Period", "Energy (kWh)", "Price (EUR/MWh)", "Value (EUR)"],
                detail_rows,
            )
        )
    _market_value_tables(content, context, gathered)
    add_details(content, gathered.details, gathered.total_rows)
    content.notes.append(
        "Each quarter-hour of production is valued at its zone's day-ahead price before "
        "summing, so negative-price hours lower the value. Average prices are weighted by "
        "the energy produced."
    )
    return content


def _market_value_buckets(
    content: ReportContent,
    context: ReportContext,
    system: System,
    buckets: list[dict[str, Any]],
    gathered: _Gathered,
) -> list[list[Cell]]:
    """As `_production_buckets`, for market value."""
    interval = context.interval
    tz = ZoneInfo(context.calendar.bucket_zone(system.timezone))
    detail_rows: list[list[Cell]] = []
    for bucket in buckets:
        key = bucket_key(bucket["start"], interval, tz)
        label = period_label(key, interval, context.tz)
        shared = gathered.per_bucket.setdefault(key, _Bucket())
        shared.energy_wh = add_values(shared.energy_wh, bucket["energy_wh"])
        shared.value_eur = add_values(shared.value_eur, bucket["value_eur"])
        shared.priced_energy_wh += _priced_energy(bucket)
        gathered.total_rows += 1
        if context.wants_csv:
            content.csv_rows.append(
                [
                    system.id,
                    system.name,
                    system.market_zone,
                    bucket["start"],
                    bucket["end"],
                    label,
                    bucket["energy_wh"],
                    bucket["price_eur_per_mwh"],
                    bucket["value_eur"],
                ]
            )
            continue
        detail_rows.append(
            [
                label,
                kwh(bucket["energy_wh"]),
                bucket["price_eur_per_mwh"],
                bucket["value_eur"],
            ]
        )
    return detail_rows


def _market_value_tables(
    content: ReportContent, context: ReportContext, gathered: _Gathered
) -> None:
    interval = context.interval
    per_bucket = gathered.per_bucket
    keys = sorted(per_bucket)
    content.chart = Chart(
        f"Market value per {interval.label}, all systems",
        "Value (EUR)",
        [axis_time(key, interval, context.tz) for key in keys],
        [per_bucket[key].value_eur for key in keys],
        bar_days(interval),
        [period_label(key, interval, context.tz) for key in keys],
    )
    content.tables.append(
        Table(
            "Systems",
            ["System", "Zone", "Energy (kWh)", "Value (EUR)", "Avg price (EUR/MWh)"],
            [*gathered.summary, _value_total(gathered, 2, 3, 4, len(gathered.summary[0]))]
            if gathered.summary
            else [],
        )
    )
    rows: list[list[Cell]] = [
        [
            period_label(key, interval, context.tz),
            kwh(per_bucket[key].energy_wh),
            per_bucket[key].value_eur,
            _weighted_price(per_bucket[key]),
        ]
        for key in keys
    ]
    content.tables.append(
        Table(
            f"Market value per {interval.label}, all systems",
            ["Period", "Energy (kWh)", "Value (EUR)", "Avg price (EUR/MWh)"],
            [*rows, _value_total(gathered, 1, 2, 3, 4)] if rows else [],
        )
    )


def _value_total(
    gathered: _Gathered, energy: int, value: int, price: int, width: int
) -> list[Cell]:
    """The total row of a market value table: energy and value summed, the price weighted
    by the priced energy of every bucket (the capture price of the whole report)."""
    buckets = gathered.per_bucket.values()
    total: list[Cell] = ["Total"] + [None] * (width - 1)
    energies = [b.energy_wh for b in buckets if b.energy_wh is not None]
    values = [b.value_eur for b in buckets if b.value_eur is not None]
    total[energy] = kwh(sum(energies)) if energies else None
    total[value] = sum(values) if values else None
    priced = sum(b.priced_energy_wh for b in buckets)
    total[price] = sum(values) / priced * 1_000_000 if values and priced > 0 else None
    return total


def _priced_energy(bucket: dict[str, Any]) -> float:
    """The bucket's production in quarter-hours that have a price. The API's bucket price is
    value ÷ that energy (the capture price), so the energy is value ÷ price; dividing a
    day's value by all its energy instead would count unpriced quarter-hours at 0 €/MWh.
    A bucket without a priced production has value 0 and adds 0 (its price is then the
    zone's time-weighted mean)."""
    value, price, energy = bucket["value_eur"], bucket["price_eur_per_mwh"], bucket["energy_wh"]
    if value is None or price is None or energy is None:
        return 0.0
    if price == 0:
        # Every priced quarter-hour at exactly 0 €/MWh: value 0 whatever the energy.
        return float(energy) if value == 0 else 0.0
    return float(value) / float(price) * 1_000_000


def _total_row(label: str, rows: list[list[Cell]], sums: list[int]) -> list[Cell]:
    """A total row under a table: the sum of the columns in `sums` (None when every row's
    is empty), blank elsewhere."""
    total: list[Cell] = [label] + [None] * (len(rows[0]) - 1 if rows else 0)
    for col in sums:
        present = [row[col] for row in rows if isinstance(row[col], int | float)]
        total[col] = float(sum(present)) if present else None  # type: ignore[arg-type]
    return total


def _weighted_price(bucket: _Bucket) -> float | None:
    if bucket.value_eur is None or bucket.priced_energy_wh <= 0:
        return None
    return bucket.value_eur / bucket.priced_energy_wh * 1_000_000
