"""The dashboard's report form, turned into the API's own `POST /reports` body and run
through the same code the API's router runs: `ReportParameters.from_request`, then
`reports.service.create_report`. Same rules, same messages; the only translation is from the
form's local days to the body's instants (midnights of the report's calendar: the chosen
time zone, else the systems' own).

Listing and downloads call `reports.service` directly, as the API's router does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.auth.scopes import plan_allows
from solarapi.dashboard.errors import FormRejected, sentence
from solarapi.dashboard.service import check_days, environment_systems
from solarapi.errors import ApiError, describe_validation_errors
from solarapi.kit.grid import Interval, local_midnight
from solarapi.kit.pagination import PageParams
from solarapi.kit.plans import Plan
from solarapi.kit.timefmt import format_timestamp
from solarapi.kit.tznames import tz_database_names
from solarapi.models.reports import Report, ReportFormat, ReportKind, ReportStatus
from solarapi.models.systems import System
from solarapi.reports import service as reports_service
from solarapi.reports.calendar import period_in
from solarapi.reports.parameters import ReportParameters
from solarapi.reports.schemas import ReportCreate

# The API's route: a plan may use the dashboard's reports exactly when it may call it.
_REPORTS_ROUTE = "/reports"
KINDS = [(kind, kind.heading) for kind in ReportKind]
FORMATS = list(ReportFormat)
INTERVALS = list(Interval)
LISTED = 50  # the newest reports shown


def reports_allowed(plan: Plan) -> bool:
    return plan_allows(plan, "POST", _REPORTS_ROUTE)


def why_not(plan: Plan) -> str:
    """Why this plan has no reports: they need Enterprise, in the dashboard as in the API."""
    return f"Reports come with the Enterprise plan; your account is on the {plan.capitalize()} plan"


@dataclass(frozen=True, slots=True)
class ReportForm:
    """What the form shows: the values as text (or what the person chose)."""

    kind: str
    format: str
    first_day: str
    last_day: str
    interval: str
    timezone: str
    system_ids: tuple[str, ...]

    @classmethod
    def blank(cls, today: date) -> ReportForm:
        """Last month, per day, as a PDF, on every system's own calendar."""
        first_of_month = today.replace(day=1)
        last = first_of_month - timedelta(days=1)
        return cls("production", "pdf", last.replace(day=1).isoformat(), last.isoformat(),
                   "1d", "", ())  # fmt: skip

    @classmethod
    def posted(cls, fields: dict[str, str], system_ids: list[str]) -> ReportForm:
        return cls(
            fields.get("type", "")[:40],
            fields.get("format", "")[:40],
            fields.get("first_day", "")[:40],
            fields.get("last_day", "")[:40],
            fields.get("interval", "")[:40],
            fields.get("timezone", "").strip()[:100],
            tuple(item[:40] for item in system_ids[:500]),
        )


def _day(name: str, text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise FormRejected(f"Choose the {name} (a date such as 2025-10-01).") from None


def _calendar_zone(form: ReportForm, systems: list[System]) -> ZoneInfo:
    """The zone whose midnights the form's days are: the chosen one, else the chosen
    systems' (the one `resolve_zone` would pick when their clocks agree; if they do not,
    the API's 400 asks for a time zone). An unknown name is left to the API's check."""
    if form.timezone:
        if form.timezone in tz_database_names():
            return ZoneInfo(form.timezone)
        return ZoneInfo("UTC")
    chosen = [s for s in systems if not form.system_ids or s.id in form.system_ids]
    zones = sorted({system.timezone for system in chosen})
    return ZoneInfo(zones[0] if zones else "UTC")


def body_of(form: ReportForm, systems: list[System]) -> dict[str, object]:
    """The JSON body the API would receive for this form."""
    first, last = _day("first day", form.first_day), _day("last day", form.last_day)
    check_days(first, last)
    tz = _calendar_zone(form, systems)
    start = datetime.fromtimestamp(local_midnight(first, tz), UTC)
    end = datetime.fromtimestamp(local_midnight(last + timedelta(days=1), tz), UTC)
    body: dict[str, object] = {
        "type": form.kind,
        "format": form.format,
        "from": format_timestamp(start),
        "to": format_timestamp(end),
    }
    if form.kind != ReportKind.DECLARATIONS:  # the form shows one for every kind
        body["interval"] = form.interval or Interval.DAY
    if form.system_ids:
        body["system_ids"] = list(form.system_ids)
    if form.timezone:
        body["timezone"] = form.timezone
    return body


async def request_report(
    session: AsyncSession,
    scope: Caller,
    form: ReportForm,
    now: datetime,
    quota: reports_service.ReportQuota,
) -> Report:
    """`POST /reports` for a signed-in person of an Enterprise account."""
    systems = await environment_systems(session, scope, now)
    try:
        body = ReportCreate.model_validate(body_of(form, systems))
        parameters = ReportParameters.from_request(body, now)
        return await reports_service.create_report(session, scope, parameters, now, quota)
    except ValidationError as exc:
        raise FormRejected(sentence(describe_validation_errors(exc.errors()))) from None
    except ApiError as exc:
        raise FormRejected(sentence(exc.message), exc.status_code) from None


@dataclass(frozen=True, slots=True)
class ReportRow:
    """A report as the list shows it."""

    report: Report
    heading: str
    period: str
    systems: int
    downloadable: bool


async def recent_reports(
    session: AsyncSession, scope: Caller, now: datetime
) -> tuple[list[ReportRow], int]:
    """The environment's newest reports (`GET /reports`, first page) and how many there are."""
    reports, total = await reports_service.list_reports(
        session, scope, status=None, report_type=None, page=PageParams(1, LISTED)
    )
    return [_row(report, now) for report in reports], total


def _row(report: Report, now: datetime) -> ReportRow:
    parameters = ReportParameters.of_report(report)
    zone = parameters.timezone or "UTC"
    period = period_in(parameters.start, parameters.end, zone)
    interval = f", per {parameters.interval.label}" if parameters.interval else ""
    return ReportRow(
        report,
        ReportKind(report.type).heading,
        f"{period.first} – {period.last} ({zone}){interval}",
        len(parameters.system_ids or ()),
        report.status is ReportStatus.COMPLETED
        and report.file_name is not None
        and not reports_service.is_expired(report, now),
    )


def download_path(report_id: str, environment: str) -> str:
    return f"/reports/{report_id}/download?env={environment}"
