"""HTTP endpoints of events: request parsing and response shaping only. (Added to the
webhooks router by `add_routes`, since the app includes one router per area and the gateway's
route table reads plain routes only.)"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.events.service import list_events, parse_type_filter
from solarapi.events.types import EVENT_TYPES
from solarapi.kit.openapi_fields import query_enum
from solarapi.kit.pagination import PageDep, Pagination, page_response
from solarapi.kit.timefmt import utcnow


class EventOut(BaseModel):
    id: str
    type: str
    created_at: str
    environment: Literal["live", "test"]
    data: dict[str, Any]


class EventPage(BaseModel):
    data: list[EventOut]
    pagination: Pagination


async def get_events(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    page: PageDep,
    type: Annotated[
        str | None, Query(description="Only events of this type"), query_enum(EVENT_TYPES)
    ] = None,
) -> Response:
    event_type = parse_type_filter(type)
    items, total = await list_events(
        session,
        account_id=principal.account_id,
        environment=principal.environment,
        event_type=event_type,
        page=page,
        now=utcnow(),
    )
    return page_response(request, [item.render() for item in items], total, page)


def add_routes(router: APIRouter) -> None:
    router.add_api_route(
        "/events",
        get_events,
        methods=["GET"],
        tags=["Events"],
        response_model=EventPage,
        summary="Events of the last 30 days, newest first",
        description="Ordered by `created_at`, `id` descending. Filter `type`: one of "
        + ", ".join(f"`{name}`" for name in EVENT_TYPES)
        + ". Events older than 30 days are not kept.",
    )
