"""HTTP endpoints of reports: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response, StreamingResponse

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.kit.bodylimit import SMALL_BODY, body_limit
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import query_enum
from solarapi.kit.pagination import PageDep, page_response
from solarapi.kit.timefmt import utcnow
from solarapi.models.reports import ReportKind, ReportStatus
from solarapi.reports import service
from solarapi.reports.parameters import ReportParameters
from solarapi.reports.schemas import KINDS_TEXT, ReportCreate, ReportList, ReportOut
from solarapi.reports.storage import ReportStorage, storage_for
from solarapi.state import SettingsDep

router = APIRouter(tags=["Reports"])


def _storage(settings: SettingsDep) -> ReportStorage:
    return storage_for(settings)


StorageDep = Annotated[ReportStorage, Depends(_storage)]


@router.post(
    "/reports",
    status_code=202,
    response_model=ReportOut,
    summary="Request a report",
    description="Validates the parameters, queues the report and answers at once with status "
    "`queued`; poll the report (`Location`) until it is `completed`, then download it.",
    responses={202: {"headers": {"Location": {"schema": {"type": "string"}}}}},
)
@body_limit(SMALL_BODY)
async def create_report(
    body: ReportCreate, principal: PrincipalDep, session: SessionDep, settings: SettingsDep
) -> Response:
    now = utcnow()
    parameters = ReportParameters.from_request(body, now)
    quota = service.ReportQuota(
        settings.reports_pending_per_account, settings.reports_kept_per_account
    )
    report = await service.create_report(session, principal, parameters, now, quota)
    return OrjsonResponse(
        service.report_to_api(report, now),
        status_code=202,
        headers={"Location": f"/api/v1/reports/{report.id}"},
    )


@router.get(
    "/reports",
    response_model=ReportList,
    summary="List reports",
    description="Newest first: ordered by `created_at`, then `id` (descending).",
)
async def list_reports(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    page: PageDep,
    status: Annotated[
        str | None,
        Query(description="queued, running, completed or failed"),
        query_enum(ReportStatus),
    ] = None,
    type: Annotated[str | None, Query(description=KINDS_TEXT), query_enum(ReportKind)] = None,
) -> Response:
    reports, total = await service.list_reports(
        session, principal, status=status, report_type=type, page=page
    )
    now = utcnow()
    return page_response(
        request, [service.report_to_api(report, now) for report in reports], total, page
    )


@router.get("/reports/{report_id}", response_model=ReportOut, summary="Get a report")
async def get_report(report_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    report = await service.get_report(session, principal, report_id)
    return OrjsonResponse(service.report_to_api(report, utcnow()))


@router.delete(
    "/reports/{report_id}",
    status_code=204,
    summary="Delete a report",
    description="Deletes the report and its file; a queued or running report is cancelled.",
)
async def delete_report(
    storage: StorageDep, report_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    await service.delete_report(session, principal, report_id, storage)
    return Response(status_code=204)


@router.get(
    "/reports/{report_id}/download",
    summary="Download a completed report",
    description="The file (`text/csv` or `application/pdf`) as an attachment. 409 while the "
    "report is not completed; 404 once it has expired (7 days after completion).",
    responses={
        200: {
            "content": {"text/csv": {}, "application/pdf": {}},
            "description": "The report file",
        },
        409: {"description": "The report has no file: not completed yet, or failed (`conflict`)"},
    },
    response_class=Response,
)
async def download_report(
    storage: StorageDep, report_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    found = await service.download(session, principal, report_id, storage, utcnow())
    return StreamingResponse(
        found.file.chunks, media_type=found.content_type, headers=found.headers()
    )
