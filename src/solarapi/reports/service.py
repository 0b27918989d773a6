"""Rules of reports: parameters checked at POST time, the report and its job created in one
transaction, listing, cancellation, downloads and expiry.

Generation itself (run by the job runner) is in `reports.jobs`; the content of each report
type in `reports.document`; the file formats in `reports.csvfile` and `reports.pdffile`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.errors import Conflict, NotFound, RateLimited
from solarapi.jobs.queue import cancel_job, enqueue
from solarapi.kit.grid import widen_range
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.reports import Report, ReportKind, ReportStatus
from solarapi.models.systems import System
from solarapi.reports import repository
from solarapi.reports.calendar import local_period, period_in, resolve_zone
from solarapi.reports.parameters import ReportParameters, check_choice
from solarapi.reports.storage import ReportStorage, StoredFile
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import get_systems

JOB_KIND = "report.generate"
JOB_MAX_ATTEMPTS = 3
RETENTION = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """A request after every check: its parameters, its systems and its calendar."""

    parameters: ReportParameters
    systems: list[System]
    timezone: str

    def stored(self) -> dict[str, object]:
        return self.parameters.stored([system.id for system in self.systems], self.timezone)


async def validate_request(
    session: AsyncSession, caller: Caller, parameters: ReportParameters
) -> ReportRequest:
    """The checks that need the database, after the parameters' own (400, in
    `ReportParameters.from_request`): unknown systems (404), their state (409), then the
    size and the calendar of the resolved systems (400) — the contract's order of checks,
    with the checks that can only be made on the systems last."""
    ids = parameters.system_ids
    systems = await _systems(session, caller, ids)
    if parameters.kind is ReportKind.MARKET_VALUE:
        systems = _with_market_zone(systems, explicit=ids is not None)
    timezone = resolve_zone(
        (system.timezone for system in systems),
        parameters.timezone,
        parameters.start,
        parameters.end,
    )
    if parameters.interval is not None:
        # Every row's bucket follows the report's calendar: its zone's grid, or a system's own
        # where its clock is the same (the same grid). The range was checked on the UTC grid
        # before the systems were read (a range within a bucket or two of the cap there left
        # to this one); over the cap on this one it is the 400 here, naming this grid's
        # largest `to`, not a report that fails later — and so is a report over its rows.
        calendar = widen_range(
            parameters.start, parameters.end, parameters.interval, ZoneInfo(timezone)
        )
        parameters.check_size(len(systems), calendar)
    return ReportRequest(parameters, systems, timezone)


async def _systems(
    session: AsyncSession, caller: Caller, ids: tuple[str, ...] | None
) -> list[System]:
    if ids is not None:
        return await get_systems(session, caller, ids)
    systems = list(
        await systems_repository.list_for_account(session, caller.account_id, caller.environment)
    )
    if not systems:
        raise Conflict(
            f"This account has no systems in its {caller.environment.value} environment to "
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


async def check_quota(session: AsyncSession, caller: Caller, quota: ReportQuota) -> None:
    pending, kept = await repository.quota_counts(session, caller.account_id)
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
    caller: Caller,
    parameters: ReportParameters,
    now: datetime,
    quota: ReportQuota | None = None,
) -> Report:
    """`POST /reports` (and the dashboard's form): the report and the job that generates it,
    in the caller's transaction: either both exist after the commit or neither does. Over
    the account's `quota`: 429 or 409."""
    request = await validate_request(session, caller, parameters)
    if quota is not None:
        await check_quota(session, caller, quota)
    report_id = new_id("rpt")
    job_id = await enqueue(
        session,
        JOB_KIND,
        {"report_id": report_id},
        max_attempts=JOB_MAX_ATTEMPTS,
        account_id=caller.account_id,
    )
    report = Report(
        id=report_id,
        account_id=caller.account_id,
        environment=caller.environment.value,
        type=parameters.kind.value,
        format=parameters.format.value,
        status=ReportStatus.QUEUED.value,
        parameters=request.stored(),
        job_id=job_id,
        created_at=now,
    )
    await repository.add(session, report)
    return report


async def get_report(session: AsyncSession, caller: Caller, report_id: str) -> Report:
    report = await repository.get_owned(
        session, caller.account_id, caller.environment.value, report_id
    )
    if report is None:
        raise NotFound(f"No report with id '{excerpt(report_id)}'")
    return report


async def list_reports(
    session: AsyncSession,
    caller: Caller,
    *,
    status: str | None,
    report_type: str | None,
    page: PageParams,
) -> tuple[list[Report], int]:
    check_choice("status", status, [s.value for s in ReportStatus])
    check_choice("type", report_type, [k.value for k in ReportKind])
    reports, total = await repository.list_page(
        session,
        account_id=caller.account_id,
        environment=caller.environment.value,
        status=status,
        report_type=report_type,
        offset=page.offset,
        limit=page.limit,
    )
    return list(reports), total


async def delete_report(
    session: AsyncSession, caller: Caller, report_id: str, storage: ReportStorage
) -> None:
    """Delete the report and its file; a queued or running job is cancelled (a running one
    stops at its next heartbeat and its file is discarded)."""
    report = await get_report(session, caller, report_id)
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

    def headers(self) -> dict[str, str]:
        """The download's headers (the API's and the dashboard's): the file is streamed in
        chunks from disk or object storage, never read whole into memory."""
        digest = base64.b64encode(bytes.fromhex(self.sha256)).decode()
        return {
            "Content-Length": str(self.file.size),
            # Our names are ASCII (`<type>_<from>_<to>_<id>.<ext>`): no RFC 5987 form needed.
            "Content-Disposition": f'attachment; filename="{self.filename}"',
            # RFC 9530: lets a client verify the file it received.
            "Repr-Digest": f"sha-256=:{digest}:",
            "Cache-Control": "private, no-store",
        }


def is_expired(report: Report, now: datetime) -> bool:
    return report.expires_at is not None and now >= report.expires_at


async def download(
    session: AsyncSession,
    caller: Caller,
    report_id: str,
    storage: ReportStorage,
    now: datetime,
) -> Download:
    report = await get_report(session, caller, report_id)
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
    parameters = ReportParameters.of_report(report)
    zones: Iterable[str] = ()
    if parameters.timezone is None:  # stored before `timezone`: the systems' zones decide
        zones = await repository.system_timezones(session, parameters.system_ids or ())
    file = await storage.open(report.file_name)
    if file is None:
        raise gone
    return Download(file, report.content_type, download_name(report, zones), report.sha256)


def download_name(report: Report, zones: Iterable[str] = ()) -> str:
    """`<type>_<first day>_<last day>_<id>.<format>`: the period's first and last local day
    on the report's calendar (its `timezone`; for a report stored before that parameter,
    its systems' zone, or UTC when they disagree or were all deleted)."""
    parameters = ReportParameters.of_report(report)
    if parameters.timezone is not None:
        period = period_in(parameters.start, parameters.end, parameters.timezone)
    else:
        period = local_period(parameters.start, parameters.end, zones)
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
