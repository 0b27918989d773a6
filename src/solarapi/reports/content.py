"""What each report type contains, independent of the file format: CSV rows, and for the PDF
a title block, a chart series and tables.

The numbers come from the same service functions the API answers with — readings
`aggregate`, prices `market_value`, the declarations service — so a report can never
disagree with `GET /systems/{id}/readings` or `/market-value` for the same parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import ApiError, NotFound
from solarapi.jobs.queue import PermanentJobError
from solarapi.kit.grid import Interval
from solarapi.kit.timefmt import parse_timestamp
from solarapi.models.reports import Report
from solarapi.models.systems import System

Cell = str | float | int | None
WH_PER_KWH = 1000.0


class ReportFailed(PermanentJobError):
    """A report that cannot be produced as requested; the message is shown to the client."""


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[Cell]]


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    ylabel: str
    # Bucket starts as wall-clock times (naive) and one value per bucket (None: no data).
    x: list[datetime]
    y: list[float | None]
    bar_days: float
    labels: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ReportContent:
    title: str
    facts: list[tuple[str, str]]
    csv_columns: list[str]
    csv_rows: list[list[Cell]] = field(default_factory=list)
    chart: Chart | None = None
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReportContext:
    report: Report
    account_name: str
    principal: Principal
    now: datetime

    @property
    def start(self) -> datetime:
        return parse_timestamp(str(self.report.parameters["from"]))

    @property
    def end(self) -> datetime:
        return parse_timestamp(str(self.report.parameters["to"]))

    @property
    def interval(self) -> Interval:
        return Interval(str(self.report.parameters.get("interval", "1d")))

    @property
    def wants_csv(self) -> bool:
        # Each format gets only the rows it prints: the CSV its flat rows, the PDF its tables.
        return self.report.format == "csv"

    @property
    def system_ids(self) -> list[str]:
        return [str(item) for item in self.report.parameters["system_ids"]]


# Per-system detail tables in the PDF are skipped above this many rows (the CSV always has
# them); the title page says so.
PDF_DETAIL_ROWS = 20_000
TITLES = {
    "production": "Production report",
    "market_value": "Market value report",
    "declarations": "Declarations report",
}
INTERVAL_NAMES = {
    "15m": "15 minutes",
    "30m": "30 minutes",
    "1h": "hour",
    "1d": "day",
    "1w": "week",
    "1M": "month",
}


async def build(session: AsyncSession, context: ReportContext) -> ReportContent:
    systems = await _systems(session, context)
    builders = {
        "production": _production,
        "market_value": _market_value,
        "declarations": _declarations,
    }
    try:
        return await builders[context.report.type](session, context, systems)
    except ApiError as exc:
        # A rule of the source refused (e.g. a system lost its market zone since the POST):
        # its message is written for clients already.
        raise ReportFailed(exc.message) from exc


async def _systems(session: AsyncSession, context: ReportContext) -> list[System]:
    from solarapi.systems.service import get_system

    systems = []
    for system_id in context.system_ids:
        try:
            systems.append(await get_system(session, context.principal, system_id))
        except NotFound:
            raise ReportFailed(
                f"system {system_id} was deleted after the report was requested; request the "
                "report again without it"
            ) from None
    return systems


def _facts(context: ReportContext, systems: Sequence[System]) -> list[tuple[str, str]]:
    report = context.report
    names = ", ".join(system.name for system in systems[:8])
    if len(systems) > 8:
        names += f" and {len(systems) - 8} more"
    facts = [
        ("Account", f"{context.account_name} ({report.account_id})"),
        ("Environment", "live" if report.environment == "live" else "test (sandbox)"),
        ("Systems", f"{len(systems)}: {names}"),
        ("Period", f"{_utc_text(context.start)} to {_utc_text(context.end)} (end exclusive)"),
    ]
    if report.type != "declarations":
        facts.append(("Interval", f"{context.interval.value} (one row per system and bucket)"))
    facts.append(("Generated at", _utc_text(context.now)))
    facts.append(("Report", report.id))
    return facts


def _utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _bucket_key(start_iso: str, interval: Interval, tz: ZoneInfo) -> datetime:
    """Where a bucket sits on the report's shared axis: local wall-clock start for calendar
    intervals (so every system's 14 June is one bucket), UTC start for fixed ones."""
    start = parse_timestamp(start_iso)
    if interval.is_calendar:
        return start.astimezone(tz).replace(tzinfo=None)
    return start.replace(tzinfo=None)


def _label(key: datetime, interval: Interval) -> str:
    if interval is Interval.DAY:
        return key.strftime("%Y-%m-%d")
    if interval is Interval.WEEK:
        year, week, _ = key.isocalendar()
        return f"{year}-W{week:02d}"
    if interval is Interval.MONTH:
        return key.strftime("%Y-%m")
    return key.strftime("%Y-%m-%d %H:%M UTC")


def _bar_days(interval: Interval) -> float:
    seconds = interval.fixed_seconds
    if seconds is not None:
        return seconds / 86400 * 0.8
    return {Interval.DAY: 0.8, Interval.WEEK: 5.6, Interval.MONTH: 24.0}[interval]


def _coverage(samples: int, expected: int) -> float | None:
    return round(samples / expected, 4) if expected else None


def _kwh(value: float | None) -> float | None:
    return None if value is None else value / WH_PER_KWH


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{value * 100:.1f} %"


def _add(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def _max(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None else max(current, value)


# --- production ---------------------------------------------------------------------------


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


async def _production(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    from solarapi.readings.service import aggregate

    interval = context.interval
    content = ReportContent(
        TITLES["production"], _facts(context, systems), list(PRODUCTION_COLUMNS)
    )
    per_bucket: dict[datetime, _Bucket] = {}
    summary: list[list[Cell]] = []
    details: list[Table] = []
    total_rows = 0
    for system in systems:
        body = await aggregate(session, system, context.start, context.end, interval, context.now)
        tz = ZoneInfo(system.timezone)
        detail_rows: list[list[Cell]] = []
        for bucket in body["data"]:
            key = _bucket_key(bucket["start"], interval, tz)
            label = _label(key, interval)
            coverage = _coverage(bucket["samples"], bucket["expected_samples"])
            shared = per_bucket.setdefault(key, _Bucket())
            shared.energy_wh = _add(shared.energy_wh, bucket["energy_wh"])
            shared.power_max_w = _max(shared.power_max_w, bucket["power_max_w"])
            shared.samples += bucket["samples"]
            shared.expected += bucket["expected_samples"]
            total_rows += 1
            if context.wants_csv:
                content.csv_rows.append(
                    [
                        system.id,
                        system.name,
                        system.timezone,
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
                    _kwh(bucket["energy_wh"]),
                    _kwh(bucket["power_avg_w"]),
                    _kwh(bucket["power_max_w"]),
                    f"{bucket['samples']}/{bucket['expected_samples']}",
                    _pct(coverage),
                ]
            )
        totals = body["meta"]["totals"]
        energy = totals["energy_wh"]
        summary.append(
            [
                system.name,
                system.id,
                system.capacity_kwp,
                _kwh(energy),
                _kwh(totals["power_max_w"]),
                _pct(_coverage(totals["samples"], totals["expected_samples"])),
                None if energy is None else energy / WH_PER_KWH / system.capacity_kwp,
            ]
        )
        details.append(
            Table(
                f"{system.name} ({system.id}), {system.timezone}",
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

    keys = sorted(per_bucket)
    content.chart = Chart(
        f"Production per {INTERVAL_NAMES[interval.value]}, all systems",
        "Energy (kWh)",
        keys,
        [_kwh(per_bucket[key].energy_wh) for key in keys],
        _bar_days(interval),
        [_label(key, interval) for key in keys],
    )
    content.tables.append(
        Table(
            "Systems",
            [
                "System",
                "Id",
                "Capacity (kWp)",
                "Energy (kWh)",
                "Peak power (kW)",
                "Coverage",
                "Yield (kWh/kWp)",
            ],
            summary,
        )
    )
    content.tables.append(
        Table(
            f"Production per {INTERVAL_NAMES[interval.value]}, all systems",
            ["Period", "Energy (kWh)", "Peak power (kW)", "Readings", "Coverage"],
            [
                [
                    _label(key, interval),
                    _kwh(per_bucket[key].energy_wh),
                    _kwh(per_bucket[key].power_max_w),
                    f"{per_bucket[key].samples}/{per_bucket[key].expected}",
                    _pct(_coverage(per_bucket[key].samples, per_bucket[key].expected)),
                ]
                for key in keys
            ],
        )
    )
    _add_details(content, details, total_rows)
    content.notes.append(
        "Energy is the sum of the quarter-hour readings of each bucket; a bucket without "
        "readings is empty, never zero. Coverage is readings present ÷ readings expected."
    )
    return content


def _add_details(content: ReportContent, details: list[Table], total_rows: int) -> None:
    if len(details) == 1 and len(content.tables) >= 2:
        # One system: the all-systems table already is its detail.
        return
    if total_rows <= PDF_DETAIL_ROWS:
        content.tables.extend(details)
    else:
        content.notes.append(
            f"Per-system tables ({total_rows:,} rows) are left out of the PDF; the CSV "
            "format of this report has every row."
        )


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


async def _market_value(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    from solarapi.prices.value import market_value

    interval = context.interval
    content = ReportContent(
        TITLES["market_value"], _facts(context, systems), list(MARKET_VALUE_COLUMNS)
    )
    per_bucket: dict[datetime, _Bucket] = {}
    summary: list[list[Cell]] = []
    details: list[Table] = []
    total_rows = 0
    for system in systems:
        body = await market_value(
            session,
            context.principal,
            system.id,
            from_text=str(context.report.parameters["from"]),
            to_text=str(context.report.parameters["to"]),
            interval_text=interval.value,
            now=context.now,
        )
        tz = ZoneInfo(system.timezone)
        detail_rows: list[list[Cell]] = []
        for bucket in body["data"]:
            key = _bucket_key(bucket["start"], interval, tz)
            label = _label(key, interval)
            shared = per_bucket.setdefault(key, _Bucket())
            shared.energy_wh = _add(shared.energy_wh, bucket["energy_wh"])
            shared.value_eur = _add(shared.value_eur, bucket["value_eur"])
            if bucket["value_eur"] is not None and bucket["energy_wh"] is not None:
                shared.priced_energy_wh += bucket["energy_wh"]
            total_rows += 1
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
                    _kwh(bucket["energy_wh"]),
                    bucket["price_eur_per_mwh"],
                    bucket["value_eur"],
                ]
            )
        totals = body["meta"]["totals"]
        summary.append(
            [
                system.name,
                system.id,
                system.market_zone,
                _kwh(totals["energy_wh"]),
                totals["value_eur"],
                totals["price_eur_per_mwh"],
            ]
        )
        details.append(
            Table(
                f"{system.name} ({system.id}), zone {system.market_zone}",
                ["Period", "Energy (kWh)", "Price (EUR/MWh)", "Value (EUR)"],
                detail_rows,
            )
        )

    keys = sorted(per_bucket)
    content.chart = Chart(
        f"Market value per {INTERVAL_NAMES[interval.value]}, all systems",
        "Value (EUR)",
        keys,
        [per_bucket[key].value_eur for key in keys],
        _bar_days(interval),
        [_label(key, interval) for key in keys],
    )
    content.tables.append(
        Table(
            "Systems",
            ["System", "Id", "Zone", "Energy (kWh)", "Value (EUR)", "Avg price (EUR/MWh)"],
            summary,
        )
    )
    content.tables.append(
        Table(
            f"Market value per {INTERVAL_NAMES[interval.value]}, all systems",
            ["Period", "Energy (kWh)", "Value (EUR)", "Avg price (EUR/MWh)"],
            [
                [
                    _label(key, interval),
                    _kwh(per_bucket[key].energy_wh),
                    per_bucket[key].value_eur,
                    _weighted_price(per_bucket[key]),
                ]
                for key in keys
            ],
        )
    )
    _add_details(content, details, total_rows)
    content.notes.append(
        "Each quarter-hour of production is valued at its zone's day-ahead price before "
        "summing, so negative-price hours lower the value. Average prices are weighted by "
        "the energy produced."
    )
    return content


def _weighted_price(bucket: _Bucket) -> float | None:
    if bucket.value_eur is None or bucket.priced_energy_wh <= 0:
        return None
    return bucket.value_eur / bucket.priced_energy_wh * 1_000_000


# --- declarations -------------------------------------------------------------------------


DECLARATION_COLUMNS = [
    "declaration_id",
    "system_id",
    "system_name",
    "type",
    "period_start",
    "period_end",
    "energy_wh",
    "metered_energy_wh",
    "coverage_ratio",
    "status",
    "status_reason",
    "reference",
    "created_at",
    "submitted_at",
    "decided_at",
    "history",
]


async def _declarations(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    from solarapi.declarations import service as declarations
    from solarapi.declarations.service import period_bounds

    caller = declarations.Caller(
        context.principal.account_id, context.principal.environment, context.principal.key_id
    )
    content = ReportContent(
        TITLES["declarations"], _facts(context, systems), list(DECLARATION_COLUMNS)
    )
    start_s = int(context.start.timestamp())
    end_s = int(context.end.timestamp())
    rows: list[list[Cell]] = []
    history_rows: list[list[Cell]] = []
    chart_x: list[datetime] = []
    chart_y: list[float | None] = []
    for system in systems:
        found: list[Any] = []
        offset = 0
        while True:
            page, total = await declarations.list_declarations(
                session,
                caller,
                system_id=system.id,
                status=None,
                declaration_type=None,
                offset=offset,
                limit=100,
            )
            found.extend(page)
            offset += len(page)
            if not page or offset >= total:
                break
        in_period = [
            item
            for item in found
            if _overlaps(period_bounds(system, item.period_start, item.period_end), start_s, end_s)
        ]
        for item in sorted(in_period, key=lambda d: (d.period_start, d.created_at, d.id)):
            view = declarations.declaration_view(item)
            transitions = [
                declarations.transition_view(step)
                for step in await declarations.history(session, caller, item.id)
            ]
            content.csv_rows.append(
                [
                    view["id"],
                    view["system_id"],
                    system.name,
                    view["type"],
                    view["period_start"],
                    view["period_end"],
                    view["energy_wh"],
                    view["metered_energy_wh"],
                    view["coverage"],
                    view["status"],
                    view["status_reason"],
                    view["reference"],
                    view["created_at"],
                    view["submitted_at"],
                    view["decided_at"],
                    "; ".join(_step_text(step) for step in transitions),
                ]
            )
            rows.append(
                [
                    view["id"],
                    system.name,
                    view["type"].replace("_", " "),
                    f"{view['period_start']} – {view['period_end']}",
                    _kwh(view["energy_wh"]),
                    _kwh(view["metered_energy_wh"]),
                    _pct(view["coverage"]),
                    view["status"],
                ]
            )
            for step in transitions:
                history_rows.append(
                    [
                        view["id"],
                        step["at"].replace("T", " ").replace("Z", " UTC"),
                        step["action"],
                        f"{step['from'] or '—'} → {step['to']}",
                        step["actor"],
                        step["reason"],
                    ]
                )
            chart_x.append(datetime.combine(item.period_start, datetime.min.time()))
            chart_y.append(_kwh(view["energy_wh"]))

    content.chart = Chart(
        "Declared energy per declaration (at the start of its period)",
        "Energy (kWh)",
        chart_x,
        chart_y,
        _declaration_bar_days(context),
        [f"{x:%Y-%m-%d}" for x in chart_x],
    )
    content.tables.append(
        Table(
            "Declarations",
            [
                "Declaration",
                "System",
                "Type",
                "Period (local days)",
                "Declared (kWh)",
                "Metered (kWh)",
                "Coverage",
                "Status",
            ],
            rows,
        )
    )
    content.tables.append(
        Table(
            "History",
            ["Declaration", "At", "Action", "Status", "By", "Reason"],
            history_rows,
        )
    )
    if not rows:
        content.notes.append("No declaration of these systems overlaps the period.")
    content.notes.append(
        "A declaration is listed when its period (local days of its system) overlaps the "
        "report period."
    )
    return content


def _overlaps(bounds: tuple[int, int], start_s: int, end_s: int) -> bool:
    return bounds[0] < end_s and bounds[1] > start_s


def _step_text(step: dict[str, Any]) -> str:
    text = f"{step['at']} {step['action']} {step['from'] or '-'}->{step['to']} by {step['actor']}"
    return f"{text} ({step['reason']})" if step["reason"] else text


def _declaration_bar_days(context: ReportContext) -> float:
    span = (context.end - context.start) / timedelta(days=1)
    return max(1.0, min(20.0, span / 40))
