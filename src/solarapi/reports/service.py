"""Rules of reports: parameters checked at POST time, the report and its job created in one
transaction, listing, cancellation, downloads and expiry.

Generation itself (run by the job runner) is in `reports.jobs`; the content of each report
type in `reports.content`; the file formats in `reports.csvfile` and `reports.pdffile`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import Conflict, NotFound, RateLimited, ValidationFailed
from solarapi.jobs.queue import cancel_job, enqueue
from solarapi.kit.grid import (
    ALL_INTERVALS,
    Interval,
    TimeRange,
    bucket_count,
    parse_interval,
    parse_range,
    widen_range,
)
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_optional, format_timestamp, parse_timestamp
from solarapi.models.reports import Report, ReportStatus
from solarapi.models.systems import System
from solarapi.reports import repository
from solarapi.reports.content import local_period
from solarapi.reports.schemas import ReportCreate
from solarapi.reports.storage import ReportStorage, StoredFile
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import get_system

REPORT_TYPES: tuple[str, ...] = ("production", "market_value", "declarations")
CONTENT_TYPES: dict[str, str] = {"csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
JOB_KIND = "report.generate"
JOB_MAX_ATTEMPTS = 3
RETENTION = timedelta(days=7)
# Caps on the size of one report (systems × buckets), so one report stays within a worker's
# memory (about 0.5 KB per CSV row while it is built; a PDF row costs more, being laid out).
MAX_ROWS: dict[str, int] = {"csv": 300_000, "pdf": 50_000}
_UTC = ZoneInfo("UTC")


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """A POST body after validation: what the generator will produce."""

    type: str
    format: str
    start: datetime
    end: datetime
    interval: Interval | None
    systems: list[System]

    def parameters(self) -> dict[str, Any]:
        parameters: dict[str, Any] = {
            "system_ids": [system.id for system in self.systems],
            "from": format_timestamp(self.start),
            "to": format_timestamp(self.end),
        }
        if self.interval is not None:
            parameters["interval"] = self.interval.value
        return parameters


def _choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValidationFailed(
            f"{name} must be one of {', '.join(allowed)}; got '{excerpt(value)}'"
        )
    return value


def _required(name: str, value: str | None) -> str:
    if value is None or value.strip() == "":
        raise ValidationFailed(
            f"{name} is required: an RFC 3339 timestamp with a zone, such as 2025-06-01T00:00:00Z"
        )
    return value


async def validate_request(
    session: AsyncSession, principal: Principal, body: ReportCreate, now: datetime
) -> ReportRequest:
    """Every parameter error (400) first, then unknown systems (404), then state (409) —
    the contract's order of checks."""
    report_type = _choice("type", body.type, REPORT_TYPES)
    report_format = _choice("format", body.format, tuple(CONTENT_TYPES))
    interval: Interval | None = None
    if report_type != "declarations":
        interval = parse_interval(body.interval, ALL_INTERVALS, Interval.DAY)
    elif body.interval is not None:
        raise ValidationFailed(
            "interval does not apply to declarations reports (they list whole declarations); "
            "leave it out"
        )
    start, end = parse_range(_required("from", body.from_), _required("to", body.to), now)
    # The bucket cap per system, on the UTC calendar (a system's own zone moves the edges by
    # hours, which changes the count by one bucket at most).
    time_range = widen_range(start, end, interval or Interval.DAY, _UTC)
    ids = body.system_ids
    if ids is not None:
        if not ids:
            raise ValidationFailed(
                "system_ids must name at least one system; leave it out to report on every "
                "system of this environment"
            )
        seen: set[str] = set()
        for index, system_id in enumerate(ids):
            if system_id in seen:
                raise ValidationFailed(
                    f"system_ids[{index}]: '{excerpt(system_id)}' is listed twice"
                )
            seen.add(system_id)
    if interval is not None and ids is not None:
        # Before the lookup of the systems: a parameter error (400) precedes a 404.
        _check_size(report_format, interval, time_range, len(ids))

    systems = await _systems(session, principal, ids)
    if report_type == "market_value":
        systems = _with_market_zone(systems, explicit=ids is not None)
    if interval is not None and ids is None:
        _check_size(report_format, interval, time_range, len(systems))
    return ReportRequest(report_type, report_format, start, end, interval, systems)


def _check_size(
    report_format: str, interval: Interval, time_range: TimeRange, system_count: int
) -> None:
    rows = bucket_count(time_range.start_s, time_range.end_s, interval, _UTC) * system_count
    if rows > MAX_ROWS[report_format]:
        raise ValidationFailed(
            f"the report would hold about {rows:,} rows ({system_count} systems × "
            f"{interval.value} buckets), more than the {MAX_ROWS[report_format]:,} a "
            f"{report_format} report allows; choose a coarser interval, a shorter range or "
            "fewer systems"
        )


async def _systems(
    session: AsyncSession, principal: Principal, ids: list[str] | None
) -> list[System]:

    if ids is not None:
        return [await get_system(session, principal, system_id) for system_id in ids]
    systems = list(
        await systems_repository.list_for_account(
            session, principal.account_id, principal.environment.value
        )
    )
    if not systems:
        raise Conflict(
            f"This account has no systems in its {principal.environment.value} environment to "
            "report on; create one with POST /api/v1/systems first"
        )
    return systems


def _with_market_zone(systems: list[System], *, explicit: bool) -> list[System]:
    missing = [system.id for system in systems if system.market_zone is None]
    if explicit and missing:
        raise Conflict(
            f"system {missing[0]} has no market_zone, so its production has no market value; "
            "set one with PATCH /api/v1/systems/{id} or leave the system out"
        )
    priced = [system for system in systems if system.market_zone is not None]
    if not priced:
        raise Conflict(
            "none of this environment's systems has a market_zone, so there is no market "
            "value to report; set one with PATCH /api/v1/systems/{id}"
        )
    return priced


@dataclass(frozen=True, slots=True)
class ReportQuota:
    """Per account: reports queued or running (429 beyond), reports kept with a file (409)."""

    pending: int
    kept: int


# Seconds a client over the pending quota is told to wait: about one report's time.
QUOTA_RETRY_AFTER_S = 30


async def check_quota(session: AsyncSession, principal: Principal, quota: ReportQuota) -> None:
    pending, kept = await repository.quota_counts(session, principal.account_id)
    if pending >= quota.pending:
        raise RateLimited(
            f"This account has {pending} reports queued or running, the most it may have "
            f"({quota.pending}); request more once one has finished",
            headers={"Retry-After": str(QUOTA_RETRY_AFTER_S)},
        )
    if kept >= quota.kept:
        raise Conflict(
            f"This account keeps {kept} report files, the most it may keep ({quota.kept}); "
            "delete some (DELETE /api/v1/reports/{id}) or wait for them to expire"
        )


async def create_report(
    session: AsyncSession,
    principal: Principal,
    body: ReportCreate,
    now: datetime,
    quota: ReportQuota | None = None,
) -> Report:
    """The report and the job that generates it, in the caller's transaction: either both
    exist after the commit or neither does. Over the account's `quota`: 429 or 409."""
    request = await validate_request(session, principal, body, now)
    if quota is not None:
        await check_quota(session, principal, quota)
    report_id = new_id("rpt")
    job_id = await enqueue(
        session,
        JOB_KIND,
        {"report_id": report_id},
        max_attempts=JOB_MAX_ATTEMPTS,
        account_id=principal.account_id,
    )
    report = Report(
        id=report_id,
        account_id=principal.account_id,
        environment=principal.environment.value,
        type=request.type,
        format=request.format,
        status=ReportStatus.QUEUED.value,
        parameters=request.parameters(),
        job_id=job_id,
        created_at=now,
    )
    await repository.add(session, report)
    return report


async def get_report(session: AsyncSession, principal: Principal, report_id: str) -> Report:
    report = await repository.get_owned(
        session, principal.account_id, principal.environment.value, report_id
    )
    if report is None:
        raise NotFound(f"No report with id '{excerpt(report_id)}'")
    return report


async def list_reports(
    session: AsyncSession,
    principal: Principal,
    *,
    status: str | None,
    report_type: str | None,
    page: PageParams,
) -> tuple[list[Report], int]:
    if status is not None:
        _choice("status", status, tuple(ReportStatus))
    if report_type is not None:
        _choice("type", report_type, REPORT_TYPES)
    reports, total = await repository.list_page(
        session,
        account_id=principal.account_id,
        environment=principal.environment.value,
        status=status,
        report_type=report_type,
        offset=page.offset,
        limit=page.limit,
    )
    return list(reports), total


async def delete_report(
    session: AsyncSession, principal: Principal, report_id: str, storage: ReportStorage
) -> None:
    """Delete the report and its file; a queued or running job is cancelled (a running one
    stops at its next heartbeat and its file is discarded)."""
    report = await get_report(session, principal, report_id)
    if report.job_id is not None and report.status in (
        ReportStatus.QUEUED.value,
        ReportStatus.RUNNING.value,
    ):
        await cancel_job(session, report.job_id)
    await repository.delete_report(session, report.id)
    if report.file_name is not None:
        await storage.delete(report.file_name)


@dataclass(frozen=True, slots=True)
class Download:
    file: StoredFile
    content_type: str
    filename: str
    sha256: str


def is_expired(report: Report, now: datetime) -> bool:
    return report.expires_at is not None and now >= report.expires_at


async def download(
    session: AsyncSession,
    principal: Principal,
    report_id: str,
    storage: ReportStorage,
    now: datetime,
) -> Download:
    report = await get_report(session, principal, report_id)
    if report.status == ReportStatus.FAILED.value:
        raise Conflict(f"Report {report.id} failed, so it has no file: {report.error}")
    if report.status != ReportStatus.COMPLETED.value:
        raise Conflict(
            f"Report {report.id} is {report.status}; its file can be downloaded once the "
            f"status is completed (poll GET /api/v1/reports/{report.id})"
        )
    gone = NotFound(
        f"Report {report.id} expired at {format_optional(report.expires_at)}: files are kept "
        f"{RETENTION.days} days after completion; request a new report"
    )
    if is_expired(report, now) or report.file_name is None:
        raise gone
    assert report.content_type is not None
    assert report.sha256 is not None
    zones = await repository.system_timezones(session, report.parameters.get("system_ids", []))
    file = await storage.open(report.file_name)
    if file is None:
        raise gone
    return Download(file, report.content_type, download_name(report, zones), report.sha256)


def download_name(report: Report, zones: Iterable[str]) -> str:
    """`<type>_<first day>_<last day>_<id>.<format>`: the period's first and last local day of
    the report's systems (UTC when they are in several zones, or all deleted)."""
    period = local_period(
        parse_timestamp(str(report.parameters["from"])),
        parse_timestamp(str(report.parameters["to"])),
        zones,
    )
    return f"{report.type}_{period.first}_{period.last}_{report.id}.{report.format}"


def report_to_api(report: Report, now: datetime) -> dict[str, Any]:
    downloadable = (
        report.status == ReportStatus.COMPLETED.value
        and report.file_name is not None
        and not is_expired(report, now)
    )
    file = (
        {
            "content_type": report.content_type,
            "size_bytes": report.size_bytes,
            "sha256": report.sha256,
        }
        if downloadable
        else None
    )
    return {
        "id": report.id,
        "type": report.type,
        "format": report.format,
        "status": report.status,
        "parameters": report.parameters,
        "created_at": format_timestamp(report.created_at),
        "started_at": format_optional(report.started_at),
        "completed_at": format_optional(report.completed_at),
        "expires_at": format_optional(report.expires_at),
        "error": report.error,
        "file": file,
        "download_url": f"/api/v1/reports/{report.id}/download" if downloadable else None,
    }
