"""What a report contains, independent of the file format: CSV rows, and for the PDF a title
block, a chart series and tables. The types and shared helpers live here; the report types
in `reports.series` (production, market value) and `reports.declared` (declarations), and
`reports.builder` picks one.

The numbers come from the same service functions the API answers with — readings
`aggregate`, prices `market_value`, the declarations service — so a report can never
disagree with `GET /systems/{id}/readings` or `/market-value` for the same parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from solarapi.auth.principal import Principal
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


def facts(context: ReportContext, systems: Sequence[System]) -> list[tuple[str, str]]:
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
            f"{local_period(context.start, context.end, (s.timezone for s in systems)).text()}"
            f"; in UTC {utc_text(context.start)} to {utc_text(context.end)} (end exclusive)",
        ),
    ]
    if report.type != "declarations":
        facts.append(("Interval", f"{context.interval.value} (one row per system and bucket)"))
    facts.append(("Generated at", utc_text(context.now)))
    return facts


@dataclass(frozen=True, slots=True)
class LocalPeriod:
    """A report's period on the systems' local calendar: its first and last day (inclusive)
    in `zone` — the systems' time zone when their clocks agree over the whole period (one
    zone, or several with the same offsets: NL and DE-LU), else UTC. `label` names them."""

    first: date
    last: date
    zone: str
    label: str

    def text(self) -> str:
        return f"{self.first.isoformat()} to {self.last.isoformat()} ({self.label})"


def local_period(start: datetime, end: datetime, zones: Iterable[str]) -> LocalPeriod:
    """[start, end) as local days: an October report (00:00 1 October to 00:00 1 November
    local) is 2026-10-01 to 2026-10-31, not the UTC dates 2026-09-30 and 2026-10-31."""
    names = tuple(sorted(set(zones)))
    if names and clocks_agree(names, start, end):
        zone, label = names[0], " = ".join(names)
    else:
        zone = label = "UTC"
    tz = ZoneInfo(zone)
    local_start, local_end = start.astimezone(tz), end.astimezone(tz)
    last = local_end.date()
    if local_end.time() == datetime.min.time() and last > local_start.date():
        last -= timedelta(days=1)  # the end is exclusive: a midnight ends the day before
    return LocalPeriod(local_start.date(), last, zone, label)


@functools.lru_cache(maxsize=256)
def clocks_agree(zones: tuple[str, ...], start: datetime, end: datetime) -> bool:
    """Whether every zone shows the same local time at every quarter-hour of [start, end]:
    compared by their UTC offsets, not their names (Amsterdam and Berlin agree, Amsterdam
    and London do not). Offsets change only on quarter-hour boundaries. Kept per period:
    a download's file name asks again for the same one."""
    if len(zones) <= 1:
        return True
    infos = [ZoneInfo(name) for name in zones]
    moment = start.astimezone(UTC)
    step = timedelta(minutes=15)
    while moment <= end:
        first = moment.astimezone(infos[0]).utcoffset()
        if any(moment.astimezone(tz).utcoffset() != first for tz in infos[1:]):
            return False
        moment += step
    return True


def utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def bucket_key(start_iso: str, interval: Interval, tz: ZoneInfo) -> datetime:
    """Where a bucket sits on the report's shared axis: local wall-clock start for calendar
    intervals (so every system's 14 June is one bucket), UTC start for fixed ones."""
    start = parse_timestamp(start_iso)
    if interval.is_calendar:
        return start.astimezone(tz).replace(tzinfo=None)
    return start.replace(tzinfo=None)


def period_label(key: datetime, interval: Interval) -> str:
    if interval is Interval.DAY:
        return key.strftime("%Y-%m-%d")
    if interval is Interval.WEEK:
        year, week, _ = key.isocalendar()
        return f"{year}-W{week:02d}"
    if interval is Interval.MONTH:
        return key.strftime("%Y-%m")
    return key.strftime("%Y-%m-%d %H:%M UTC")


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
