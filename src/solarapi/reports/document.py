"""A report's document, independent of the file format: CSV rows, and for the PDF a title
block, a chart series and tables. The types and shared helpers live here; the builders of
each kind in `reports.production_and_value` (production, market value) and
`reports.declarations_report` (declarations), and `reports.compose` picks one.

The numbers come from the same service functions the API answers with — readings
`aggregate`, prices `value_of`, the declarations service — so a report can never disagree
with `GET /systems/{id}/readings` or `/market-value` for the same parameters. (A system
bucketed on another zone's calendar, `reports.calendar`, gets that zone's buckets from the
same functions: each equals the endpoint's totals over the bucket's UTC span.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from solarapi.auth.principal import Caller
from solarapi.jobs.queue import PermanentJobError
from solarapi.kit.grid import Interval
from solarapi.models.reports import Report, ReportFormat
from solarapi.models.systems import ReadableSystem
from solarapi.reports.calendar import ReportCalendar
from solarapi.reports.parameters import ReportParameters

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
    # Under the axis: the report's period on the systems' local calendar.
    xlabel: str = ""


@dataclass(slots=True)
class ReportContent:
    title: str
    facts: list[tuple[str, str]]
    csv_columns: list[str]
    csv_rows: list[list[Cell]] = field(default_factory=list)
    chart: Chart | None = None
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Wide tables (declarations, with ids and history) print on landscape pages.
    landscape: bool = False


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What a report is built from: the report, its parameters and calendar, and its owner
    as the caller the source services take (account and environment: the same tenancy
    checks apply to a report as to the requests it stands for)."""

    report: Report
    parameters: ReportParameters
    calendar: ReportCalendar
    account_name: str
    caller: Caller
    now: datetime

    @property
    def start(self) -> datetime:
        return self.parameters.start

    @property
    def end(self) -> datetime:
        return self.parameters.end

    @property
    def interval(self) -> Interval:
        return self.parameters.interval or Interval.DAY

    @property
    def wants_csv(self) -> bool:
        # Each format gets only the rows it prints: the CSV its flat rows, the PDF its tables.
        return self.parameters.format is ReportFormat.CSV

    @property
    def system_ids(self) -> list[str]:
        return list(self.parameters.system_ids or ())

    @property
    def tz(self) -> ZoneInfo:
        """The report's zone: its period and its fixed-interval labels."""
        return self.calendar.tz


# Per-system detail tables in the PDF are skipped above this many rows (the CSV always has
# them); the title page says so.
PDF_DETAIL_ROWS = 20_000


def facts(context: ReportContext, systems: Sequence[ReadableSystem]) -> list[tuple[str, str]]:
    report = context.report
    names = ", ".join(system.name for system in systems[:8])
    if len(systems) > 8:
        names += f" and {len(systems) - 8} more"
    facts = [
        ("Account", context.account_name),
        ("Environment", "live" if report.environment == "live" else "test (sandbox)"),
        ("Systems", f"{len(systems)}: {names}"),
        (
            "Period",
            f"{context.calendar.period().text()}; in UTC {utc_text(context.start)} to {utc_text(context.end)} (end exclusive)",
        ),
    ]
    if context.parameters.kind.bucketed:
        facts.append(("Interval", f"{context.interval.value} (one row per system and bucket)"))
    facts.append(("Generated at", utc_text(context.now)))
    return facts


def utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def bucket_key(start_s: int, interval: Interval, tz: ZoneInfo) -> datetime:
    """Where a bucket sits on the report's shared axis: local wall-clock start for calendar
    intervals (so every system's 14 June is one bucket), UTC start for fixed ones."""
    start = datetime.fromtimestamp(start_s, UTC)
    if interval.is_calendar:
        return start.astimezone(tz).replace(tzinfo=None)
    return start.replace(tzinfo=None)


def period_label(key: datetime, interval: Interval, tz: ZoneInfo | None = None) -> str:
    """A bucket's name on the report's calendar: its local date, ISO week or month, or for
    15m/30m/1h its local start with the offset in force ("2025-06-01 14:00 UTC+02:00";
    "… UTC" on the UTC calendar), so the two autumn hours of the same local time differ."""
    if interval is Interval.DAY:
        return key.strftime("%Y-%m-%d")
    if interval is Interval.WEEK:
        year, week, _ = key.isocalendar()
        return f"{year}-W{week:02d}"
    if interval is Interval.MONTH:
        return key.strftime("%Y-%m")
    if tz is None or tz.key == "UTC":
        return key.strftime("%Y-%m-%d %H:%M UTC")
    local = key.replace(tzinfo=UTC).astimezone(tz)
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M} UTC{offset[:3]}:{offset[3:]}"


def axis_time(key: datetime, interval: Interval, tz: ZoneInfo) -> datetime:
    """Where a bucket sits on the chart's axis: its wall-clock start on the report's
    calendar (a fixed interval's key is its UTC start)."""
    if interval.is_calendar:
        return key
    return key.replace(tzinfo=UTC).astimezone(tz).replace(tzinfo=None)


def bar_days(interval: Interval) -> float:
    seconds = interval.fixed_seconds
    if seconds is not None:
        return seconds / 86400 * 0.8
    return {Interval.DAY: 0.8, Interval.WEEK: 5.6, Interval.MONTH: 24.0}[interval]


def coverage_ratio(samples: int, expected: int) -> float | None:
    return round(samples / expected, 4) if expected else None


def kwh(value: float | None) -> float | None:
    return None if value is None else value / WH_PER_KWH


def percent(value: float | None) -> str | None:
    return None if value is None else f"{value * 100:.1f} %"


def add_values(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def max_value(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None else max(current, value)


def add_details(content: ReportContent, details: list[Table], total_rows: int) -> None:
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
