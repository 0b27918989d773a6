"""Production and market value reports: one row per system and bucket, from the same service
functions the API answers `GET /systems/{id}/readings` and `/market-value` with. A PDF
production report also shows, from the service of `GET /systems/{id}/performance`, the
expected energy, the EPI and the performance ratio where it is defined (—, not 0, where not)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models.reports import ReportKind
from solarapi.models.systems import System
from solarapi.performance import service as performance_service
from solarapi.prices.market_value import ValuedBucket, each_bucket, priced_zone, value_of
from solarapi.readings.rendering import BucketFigures
from solarapi.readings.service import aggregate
from solarapi.reports.document import (
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
class _Expected:
    """Expected against actual summed over systems (PDF production reports): the energy the
    model expected and the figures of a fleet PR and EPI, over the quarter-hours that have a
    reading. The PR of several systems is Σ E ÷ Σ (capacity × insolation) (IEC 61724-1's
    definition over their joint nameplate), defined only while every system that has a
    reading there has a PR."""

    energy_wh: float = 0.0
    expected_wh: float | None = None
    reference_wh: float = 0.0  # Σ capacity_kwp × insolation_wh_m2: PR's denominator
    counted: bool = False  # some quarter-hour has a reading
    without_pr: bool = False  # some of them have no measured irradiance

    def add(self, kpis: performance_service.Kpis, i: int, capacity_kwp: float) -> None:
        if int(kpis.samples[i]) == 0:
            return
        self.counted = True
        self.energy_wh += float(kpis.energy_wh[i])
        self.expected_wh = (self.expected_wh or 0.0) + float(kpis.expected_energy_wh[i])
        self.reference_wh += capacity_kwp * float(kpis.insolation_wh_m2[i])
        self.without_pr |= int(kpis.typical_samples[i]) > 0

    @property
    def performance_ratio(self) -> float | None:
        if not self.counted or self.without_pr or self.reference_wh <= 0:
            return None
        return round(self.energy_wh / self.reference_wh, 3)

    @property
    def energy_performance_index(self) -> float | None:
        if self.expected_wh is None or self.expected_wh <= 0:
            return None
        return round(self.energy_wh / self.expected_wh, 3)

    def cells(self) -> list[Cell]:
        """Expected (kWh), EPI and PR, as the PDF's tables show them."""
        return [kwh(self.expected_wh), self.energy_performance_index, self.performance_ratio]


EXPECTED_COLUMNS = ["Expected (kWh)", "EPI", "PR"]


@dataclass(slots=True)
class _Bucket:
    energy_wh: float | None = None
    power_max_w: float | None = None
    samples: int = 0
    expected: int = 0
    value_eur: float | None = None
    priced_energy_wh: float = 0.0
    performance: _Expected = field(default_factory=_Expected)


@dataclass(slots=True)
class _Gathered:
    """What the per-system loop collects for the tables after it."""

    per_bucket: dict[datetime, _Bucket] = field(default_factory=dict)
    summary: list[list[Cell]] = field(default_factory=list)
    details: list[Table] = field(default_factory=list)
    total_rows: int = 0
    performance: _Expected = field(default_factory=_Expected)  # the whole report's


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
        # The PDF's expected against actual (the CSV's columns are unchanged).
        expected = (
            None
            if context.wants_csv
            else await performance_service.performance(
                session, system, context.start, context.end, context.interval, context.now
            )
        )
        detail_rows = _production_buckets(
            content, context, system, readings.each_bucket(), gathered, expected
        )
        totals = readings.totals
        energy = totals.energy_wh
        if expected is not None:
            gathered.performance.add(expected.totals, 0, system.capacity_kwp)
        gathered.summary.append(
            [
                system.name,
                system.capacity_kwp,
                kwh(energy),
                kwh(totals.power_max_w),
                percent(coverage_ratio(totals.samples, totals.expected_samples)),
                None if energy is None else energy / WH_PER_KWH / system.capacity_kwp,
                *_cells(None if expected is None else expected.total()),
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
                    *EXPECTED_COLUMNS,
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
    if not context.wants_csv:
        content.notes.append(
            "Expected is the energy the performance model (pvlib PVWatts with the system's "
            "orientation, losses and inverter) expected over the same quarter-hours, from "
            "measured irradiance where there is some, else the site's typical year; EPI = "
            "energy ÷ expected. PR is the performance ratio (IEC 61724-1: specific yield ÷ "
            "reference yield), shown only where every counted quarter-hour has measured "
            "(sensor or satellite) irradiance, else —; over several systems Σ energy ÷ "
            "Σ (capacity × insolation). The same numbers as GET /systems/{id}/performance."
        )
    return content


def _production_buckets(
    content: ReportContent,
    context: ReportContext,
    system: System,
    buckets: list[BucketFigures],
    gathered: _Gathered,
    expected: performance_service.Performance | None,
) -> list[list[Cell]]:
    """Adds one system's buckets to the all-systems totals and, for a CSV, to its rows;
    returns the system's PDF table rows (none for a CSV). `expected`: the system's
    performance over the same buckets (PDF only)."""
    interval = context.interval
    zone = context.calendar.bucket_zone(system.timezone)
    tz = ZoneInfo(zone)
    detail_rows: list[list[Cell]] = []
    modelled = {} if expected is None else _bucket_index(expected)
    all_figures = () if expected is None else expected.figures()
    for bucket in buckets:
        key = bucket_key(bucket.start_s, interval, tz)
        label = period_label(key, interval, context.tz)
        coverage = coverage_ratio(bucket.samples, bucket.expected_samples)
        shared = gathered.per_bucket.setdefault(key, _Bucket())
        shared.energy_wh = add_values(shared.energy_wh, bucket.energy_wh)
        shared.power_max_w = max_value(shared.power_max_w, bucket.power_max_w)
        shared.samples += bucket.samples
        shared.expected += bucket.expected_samples
        gathered.total_rows += 1
        if context.wants_csv:
            content.csv_rows.append(
                [
                    system.id,
                    system.name,
                    zone,  # the zone of this row's buckets and period_local
                    bucket.start,
                    bucket.end,
                    label,
                    bucket.energy_wh,
                    bucket.power_avg_w,
                    bucket.power_max_w,
                    bucket.samples,
                    bucket.expected_samples,
                    coverage,
                ]
            )
            continue
        figures = None
        if expected is not None and (i := modelled.get(bucket.start_s)) is not None:
            figures = all_figures[i]
            shared.performance.add(expected.buckets, i, system.capacity_kwp)
        detail_rows.append(
            [
                label,
                kwh(bucket.energy_wh),
                kwh(bucket.power_avg_w),
                kwh(bucket.power_max_w),
                f"{bucket.samples}/{bucket.expected_samples}",
                percent(coverage),
                *_cells(figures),
            ]
        )
    return detail_rows


def _cells(figures: performance_service.Figures | None) -> list[Cell]:
    """One system's Expected (kWh), EPI and PR: the API's own figures."""
    if figures is None:
        return [None, None, None]
    return [
        kwh(figures.expected_energy_wh),
        figures.energy_performance_index,
        figures.performance_ratio,
    ]


def _bucket_index(performance: performance_service.Performance) -> dict[int, int]:
    """Each performance bucket's index by its start (epoch seconds)."""
    return {start: i for i, start in enumerate(performance.time_range.edges()[:-1].tolist())}


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
                *EXPECTED_COLUMNS,
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
            *per_bucket[key].performance.cells(),
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
    total[5:8] = gathered.performance.cells()
    content.tables.append(
        Table(
            f"Production per {interval.label}, all systems",
            ["Period", "Energy (kWh)", "Peak power (kW)", "Readings", "Coverage",
             *EXPECTED_COLUMNS],
            [*rows, total],
        )
    )  # fmt: skip


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
    total[6:9] = gathered.performance.cells()
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
        detail_rows = _market_value_buckets(
            content, context, system, each_bucket(valued.valued), gathered
        )
        totals = valued.totals
        gathered.summary.append(
            [
                system.name,
                system.market_zone,
                kwh(totals.energy_wh),
                totals.value_eur,
                totals.price_eur_per_mwh,
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
    buckets: list[ValuedBucket],
    gathered: _Gathered,
) -> list[list[Cell]]:
    """As `_production_buckets`, for market value."""
    interval = context.interval
    tz = ZoneInfo(context.calendar.bucket_zone(system.timezone))
    detail_rows: list[list[Cell]] = []
    for bucket in buckets:
        key = bucket_key(bucket.start_s, interval, tz)
        label = period_label(key, interval, context.tz)
        shared = gathered.per_bucket.setdefault(key, _Bucket())
        shared.energy_wh = add_values(shared.energy_wh, bucket.energy_wh)
        shared.value_eur = add_values(shared.value_eur, bucket.value_eur)
        shared.priced_energy_wh += _priced_energy(bucket)
        gathered.total_rows += 1
        if context.wants_csv:
            content.csv_rows.append(
                [
                    system.id,
                    system.name,
                    system.market_zone,
                    bucket.start,
                    bucket.end,
                    label,
                    bucket.energy_wh,
                    bucket.price_eur_per_mwh,
                    bucket.value_eur,
                ]
            )
            continue
        detail_rows.append(
            [
                label,
                kwh(bucket.energy_wh),
                bucket.price_eur_per_mwh,
                bucket.value_eur,
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


def _priced_energy(bucket: ValuedBucket) -> float:
    """The bucket's production in quarter-hours that have a price. The API's bucket price is
    value ÷ that energy (the capture price), so the energy is value ÷ price; dividing a
    day's value by all its energy instead would count unpriced quarter-hours at 0 €/MWh.
    A bucket without a priced production has value 0 and adds 0 (its price is then the
    zone's time-weighted mean)."""
    value, price, energy = bucket.value_eur, bucket.price_eur_per_mwh, bucket.energy_wh
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
