"""What a report is asked for: `ReportParameters`, a frozen value built once from a request
(the API's `POST /reports` body, or the dashboard's form turned into that body) and read
back from a stored report. Every 400 about the request's own values is raised here, in the
contract's words, before anything is read from the database.

Reading top-down from `POST /reports`: the router parses the body into `ReportCreate`,
`ReportParameters.from_request` checks each field, `service.create_report` resolves the
systems (one query) and the report's calendar (`calendar.resolve_zone`), then stores
`parameters.stored(...)` as the report's `parameters`. The job reads it back with
`ReportParameters.of_report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import (
    ALL_INTERVALS,
    MAX_BUCKETS,
    Interval,
    TimeRange,
    TooManyBuckets,
    bucket_count,
    parse_interval,
    parse_range,
    widen_range,
)
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_timestamp, parse_timestamp
from solarapi.kit.tznames import check_time_zone
from solarapi.models.reports import Report, ReportFormat, ReportKind
from solarapi.reports.schemas import ReportCreate

_UTC = ZoneInfo("UTC")
# How many buckets more a range may hold on the UTC calendar than on a zone's own: a bucket at
# each end, where the zone's edges fall inside the UTC calendar's first and last bucket.
_ZONE_SHIFT_BUCKETS = 2
# Caps on the size of one report (systems × buckets), so one report stays within a worker's
# memory (about 0.5 KB per CSV row while it is built; a PDF row costs more, being laid out).
MAX_ROWS: dict[ReportFormat, int] = {ReportFormat.CSV: 300_000, ReportFormat.PDF: 50_000}


@dataclass(frozen=True, slots=True)
class ReportParameters:
    """A report's parameters, checked.

    In a request, `system_ids` None means every system of the environment and `timezone`
    None means "the systems' own zone"; in a stored report both are resolved (`timezone`
    is None only on reports stored before the parameter existed)."""

    kind: ReportKind
    format: ReportFormat
    start: datetime
    end: datetime
    interval: Interval | None  # None for declarations, which list whole declarations
    system_ids: tuple[str, ...] | None
    timezone: str | None

    @classmethod
    def from_request(cls, body: ReportCreate, now: datetime) -> ReportParameters:
        """The body's values, each checked (400, naming the field and what it accepts)."""
        kind = ReportKind(_choice("type", body.type, [k.value for k in ReportKind]))
        report_format = ReportFormat(
            _choice("format", body.format, [f.value for f in ReportFormat])
        )
        interval: Interval | None = None
        if kind.bucketed:
            interval = parse_interval(body.interval, ALL_INTERVALS, Interval.DAY)
        elif body.interval is not None:
            raise ValidationFailed(
                "interval does not apply to declarations reports (they list whole "
                "declarations); leave it out"
            )
        start, end = parse_range(_required("from", body.from_), _required("to", body.to), now)
        parameters = cls(kind, report_format, start, end, interval, None, None)
        # The range's own rules (order, bounds, the per-system bucket cap) on the UTC calendar,
        # before any system is read (400 before 404). A zone moves the edges by hours, which
        # changes a count by a bucket or two at most: a range that far over the cap on UTC is
        # left to the report's own calendar (`service.validate_request`), which may hold it.
        time_range: TimeRange | None
        try:
            time_range = parameters.utc_range()
        except TooManyBuckets as refused:
            # A declarations report has no buckets of its own: the UTC rule stands for it.
            if not kind.bucketed or refused.count > MAX_BUCKETS + _ZONE_SHIFT_BUCKETS:
                raise
            time_range = None
        parameters = replace(parameters, system_ids=_system_ids(body.system_ids))
        if body.timezone is not None:
            try:
                parameters = replace(parameters, timezone=check_time_zone(body.timezone))
            except ValueError as exc:
                raise ValidationFailed(f"timezone: {exc}") from None
        if parameters.system_ids is not None and time_range is not None:
            # Before the systems are looked up: a parameter error (400) precedes a 404.
            parameters.check_size(len(parameters.system_ids), time_range)
        return parameters

    @classmethod
    def of_report(cls, report: Report) -> ReportParameters:
        """A stored report's parameters (as `stored` wrote them)."""
        stored = report.parameters
        interval = stored.get("interval")
        timezone = stored.get("timezone")
        return cls(
            ReportKind(report.type),
            ReportFormat(report.format),
            parse_timestamp(str(stored["from"])),
            parse_timestamp(str(stored["to"])),
            None if interval is None else Interval(str(interval)),
            tuple(str(item) for item in stored.get("system_ids", [])),
            None if timezone is None else str(timezone),
        )

    def stored(self, system_ids: Sequence[str], timezone: str) -> dict[str, object]:
        """What a report keeps (and the API shows as `parameters`): the request with its
        systems and its calendar resolved, timestamps in UTC."""
        parameters: dict[str, object] = {
            "system_ids": list(system_ids),
            "from": format_timestamp(self.start),
            "to": format_timestamp(self.end),
        }
        if self.interval is not None:
            parameters["interval"] = self.interval.value
        parameters["timezone"] = timezone
        return parameters

    def utc_range(self) -> TimeRange:
        """The range widened on the UTC calendar (400 for a reversed or too long one)."""
        return widen_range(self.start, self.end, self.interval or Interval.DAY, _UTC)

    def check_size(self, system_count: int, time_range: TimeRange) -> None:
        """400 when `system_count` systems would make more rows than the format allows, in
        the buckets of `time_range` (the UTC calendar's, or the report's own)."""
        if self.interval is None:
            return  # declarations: one row per declaration
        rows = (
            bucket_count(time_range.start_s, time_range.end_s, self.interval, time_range.tz)
            * system_count
        )
        cap = MAX_ROWS[self.format]
        if rows > cap:
            raise ValidationFailed(
                f"the report would hold about {rows:,} rows ({system_count} systems × "
                f"{self.interval.value} buckets), more than the {cap:,} a "
                f"{self.format.value} report allows; choose a coarser interval, a shorter "
                "range or fewer systems"
            )


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValidationFailed(
            f"{name} must be one of {', '.join(allowed)}; got '{excerpt(value)}'"
        )
    return value


def check_choice(name: str, value: str | None, allowed: Sequence[str]) -> None:
    """A list filter (`status`, `type`) is one of `allowed`, or absent."""
    if value is not None:
        _choice(name, value, allowed)


def _required(name: str, value: str | None) -> str:
    if value is None or value.strip() == "":
        raise ValidationFailed(
            f"{name} is required: an RFC 3339 timestamp with a zone, such as 2025-06-01T00:00:00Z"
        )
    return value


def _system_ids(ids: list[str] | None) -> tuple[str, ...] | None:
    if ids is None:
        return None
    if not ids:
        raise ValidationFailed(
            "system_ids must name at least one system; leave it out to report on every "
            "system of this environment"
        )
    seen: set[str] = set()
    for index, system_id in enumerate(ids):
        if system_id in seen:
            raise ValidationFailed(f"system_ids[{index}]: '{excerpt(system_id)}' is listed twice")
        seen.add(system_id)
    return tuple(ids)
