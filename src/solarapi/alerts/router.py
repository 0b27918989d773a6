"""HTTP endpoints of alerts: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from solarapi.alerts import service
from solarapi.alerts.rendering import render
from solarapi.alerts.schemas import AlertOut, AlertPage
from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import QUERY_SYSTEM_ID, query_enum
from solarapi.kit.pagination import PageDep, page_response
from solarapi.models.alerts import ALERT_STATUSES, ALERT_TYPES

router = APIRouter(tags=["Alerts"])


@router.get(
    "/alerts",
    response_model=AlertPage,
    summary="List alerts",
    description="The environment's alerts, newest first: ordered by `opened_at`, then `id` "
    "(descending). A system has at most one open alert per type.",
)
async def list_alerts(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    page: PageDep,
    system_id: Annotated[
        str | None, Query(description="Only this system's alerts"), QUERY_SYSTEM_ID
    ] = None,
    status: Annotated[
        str | None, Query(description="open or resolved"), query_enum(ALERT_STATUSES)
    ] = None,
    type: Annotated[
        str | None,
        Query(description="system.offline, system.zero_production or system.underperforming"),
        query_enum(ALERT_TYPES),
    ] = None,
) -> Response:
    alerts, total = await service.list_alerts(
        session, principal, system_id=system_id, status=status, alert_type=type, page=page
    )
    return page_response(request, [render(alert) for alert in alerts], total, page)


@router.get("/alerts/{alert_id}", response_model=AlertOut, summary="Get an alert")
async def get_alert(alert_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    return OrjsonResponse(render(await service.get_alert(session, principal, alert_id)))
