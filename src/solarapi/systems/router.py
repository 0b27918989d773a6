"""HTTP endpoints of systems: request parsing and response shaping only."""

from __future__ import annotations

from typing import get_args

from fastapi import APIRouter, Request
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep, get_principal
from solarapi.db import RequestSession, SessionDep
from solarapi.kit.bodylimit import SMALL_BODY, body_limit
from solarapi.kit.direct_endpoints import direct, direct_query, query_parameter
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import QUERY_ZONE, query_enum
from solarapi.kit.pagination import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    PAGE_LIMIT,
    PAGE_NUMBER,
    page_response,
    parse_page,
)
from solarapi.kit.timefmt import utcnow
from solarapi.readings.service import summary
from solarapi.systems import service
from solarapi.systems.access import read_system
from solarapi.systems.schemas import (
    Status,
    SummaryOut,
    SystemCreate,
    SystemList,
    SystemOut,
    SystemPatch,
)

router = APIRouter(tags=["Systems"])


@router.get(
    "/systems",
    response_model=SystemList,
    summary="List systems",
    description="The environment's systems ordered by `created_at`, then `id` (ascending).",
    openapi_extra={
        "parameters": [
            query_parameter(
                "status", "active, inactive or decommissioned", query_enum(get_args(Status))
            ),
            query_parameter("market_zone", "A zone code such as NL", QUERY_ZONE),
            query_parameter("page", "Page number, 1–1,000,000,000 (default 1)", PAGE_NUMBER),
            query_parameter("limit", "Items per page, 1–100 (default 50)", PAGE_LIMIT),
        ]
    },
)
@direct
async def list_systems(request: Request) -> Response:
    # Called by the gateway directly (`kit.direct_endpoints`): a fleet's integrations walk this
    # list, and FastAPI's parameter and dependency solving cost more than the page's one read.
    principal = await get_principal(request)
    query = direct_query(request.scope)
    page = parse_page(
        query.get("page"), query.get("limit"), default_limit=DEFAULT_LIMIT, max_limit=MAX_LIMIT
    )
    async with RequestSession(request) as session:
        items, total = await service.list_systems(
            session,
            principal,
            status=query.get("status"),
            market_zone=query.get("market_zone"),
            page=page,
        )
    return page_response(request, items, total, page)


@router.post(
    "/systems",
    status_code=201,
    response_model=SystemOut,
    summary="Create a system",
    responses={201: {"headers": {"Location": {"schema": {"type": "string"}}}}},
)
@body_limit(SMALL_BODY)
async def create_system(
    body: SystemCreate, principal: PrincipalDep, session: SessionDep
) -> Response:
    system = await service.create_system(session, principal, body, utcnow())
    return OrjsonResponse(
        system.render(),
        status_code=201,
        headers={"Location": f"/api/v1/systems/{system.id}"},
    )


@router.get("/systems/{system_id}", response_model=SystemOut, summary="Get a system")
async def get_system(system_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    system = await service.get_system(session, principal, system_id)
    return OrjsonResponse(system.render())


@router.patch("/systems/{system_id}", response_model=SystemOut, summary="Change a system")
@body_limit(SMALL_BODY)
async def update_system(
    system_id: str, body: SystemPatch, principal: PrincipalDep, session: SessionDep
) -> Response:
    system = await service.update_system(session, principal, system_id, body, utcnow())
    return OrjsonResponse(system.render())


@router.delete(
    "/systems/{system_id}",
    status_code=204,
    summary="Delete a system and its readings",
    description="409 while the system has a submitted or approved declaration.",
    responses={
        409: {
            "description": "The system has a submitted or approved declaration (`conflict`); "
            "withdraw it first"
        }
    },
)
async def delete_system(system_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    await service.delete_system(session, principal, system_id, utcnow())
    return Response(status_code=204)


@router.get(
    "/systems/{system_id}/summary",
    response_model=SummaryOut,
    summary="Energy today, this month, this year and lifetime (local calendar)",
)
async def get_summary(system_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    system = await read_system(session, principal, system_id)
    return OrjsonResponse((await summary(session, system, utcnow())).to_api())
