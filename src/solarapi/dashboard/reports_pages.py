"""Dashboard pages of reports (Enterprise, like the API's): request one, see the list with
its status, download a finished file. HTTP only; the rules are the API's
(report_forms.py runs its code). Other plans see why not, in the API's words."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from solarapi.auth.principal import Caller
from solarapi.dashboard.dependencies import UserDep
from solarapi.dashboard.errors import DashboardRoute, FormRejected
from solarapi.dashboard.forms import environment_of, read_form
from solarapi.dashboard.rendering import render
from solarapi.dashboard.report_forms import (
    FORMATS,
    INTERVALS,
    KINDS,
    ReportForm,
    download_path,
    recent_reports,
    reports_allowed,
    request_report,
    why_not,
)
from solarapi.dashboard.responses import redirect
from solarapi.dashboard.service import environment_systems
from solarapi.dashboard.sessions import claim_form_nonce
from solarapi.db import SessionDep
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow
from solarapi.kit.tznames import tz_database_names
from solarapi.reports import service as reports_service
from solarapi.reports.storage import storage_for
from solarapi.state import settings_of

router = APIRouter(include_in_schema=False, route_class=DashboardRoute)

_NOTICES = {
    "requested": "The report was requested. It is generated in the background: refresh this "
    "page to see its status, then download it.",
    "already-requested": "That form was already sent, so no second report was requested.",
}
# The zones a person is most likely to choose come first in the suggestions.
_COMMON_ZONES = ("UTC", "Europe/Amsterdam", "Europe/Berlin", "Europe/London")


async def _page(
    request: Request,
    session: SessionDep,
    user: UserDep,
    environment: Environment,
    *,
    form: ReportForm | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    now = utcnow()
    allowed = reports_allowed(user.plan)
    scope = Caller(user.account_id, environment)
    systems = await environment_systems(session, scope, now) if allowed else []
    rows, total = await recent_reports(session, scope, now) if allowed else ([], 0)
    own_zones = sorted({system.timezone for system in systems})
    return render(
        request,
        "reports.html",
        {
            "allowed": allowed,
            "why_not": why_not(user.plan),
            "environment": environment,
            "form": form or ReportForm.blank(now.date()),
            "kinds": KINDS,
            "formats": FORMATS,
            "intervals": INTERVALS,
            "systems": systems,
            "zone_suggestions": [*own_zones, *(z for z in _COMMON_ZONES if z not in own_zones)],
            "all_zones": sorted(tz_database_names()),
            "rows": rows,
            "total": total,
            "error": error,
            "notice": _NOTICES.get(request.query_params.get("notice", "")),
            "nonce": secrets.token_urlsafe(16),
            "download_path": download_path,
        },
        status_code=status_code,
        user=user,
    )


@router.get("/reports")
async def reports_page(request: Request, session: SessionDep, user: UserDep) -> Response:
    return await _page(request, session, user, environment_of(request.query_params.get("env")))


@router.post("/reports")
async def request_report_page(request: Request, session: SessionDep, user: UserDep) -> Response:
    posted = await read_form(request, user)
    environment = environment_of(posted.get("environment"))
    # One checkbox per system, named `system.<id>` (the form parser keeps one value a name).
    chosen = [name.removeprefix("system.") for name in posted if name.startswith("system.")]
    form = ReportForm.posted(posted, chosen)
    if not reports_allowed(user.plan):
        return await _page(
            request, session, user, environment, form=form, error=why_not(user.plan),
            status_code=403,
        )  # fmt: skip
    nonce = posted.get("nonce", "")[:64]
    if nonce and not await claim_form_nonce(session, session_id=user.session_id, nonce=nonce):
        return redirect(f"/reports?env={environment}&notice=already-requested")
    settings = settings_of(request)
    quota = reports_service.ReportQuota(
        settings.reports_pending_per_account, settings.reports_kept_per_account
    )
    scope = Caller(user.account_id, environment)
    try:
        report = await request_report(session, scope, form, utcnow(), quota)
    except FormRejected as exc:
        await session.rollback()
        return await _page(
            request, session, user, environment, form=form, error=exc.message,
            status_code=exc.status_code,
        )  # fmt: skip
    return redirect(f"/reports?env={environment}&notice=requested#report-{report.id}")


@router.get("/reports/{report_id}/download")
async def download_report(
    request: Request, report_id: str, session: SessionDep, user: UserDep
) -> Response:
    """`GET /api/v1/reports/{id}/download` for the signed-in person: the same checks (409
    while not completed, 404 once expired) as an HTML page, the same file and headers."""
    if not reports_allowed(user.plan):
        return await _page(
            request, session, user, Environment.LIVE, error=why_not(user.plan), status_code=403
        )
    scope = Caller(user.account_id, environment_of(request.query_params.get("env")))
    found = await reports_service.download(
        session, scope, report_id, storage_for(settings_of(request)), utcnow()
    )
    return StreamingResponse(
        found.file.chunks, media_type=found.content_type, headers=found.headers()
    )
