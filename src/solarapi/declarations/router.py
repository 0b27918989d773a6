"""HTTP endpoints of declarations: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.declarations import service
from solarapi.declarations.schemas import (
    DECLARATION_TYPES,
    DeclarationCreate,
    DeclarationOut,
    DeclarationPage,
    DeclarationUpdate,
    HistoryOut,
)
from solarapi.declarations.statemachine import DeclarationStatus
from solarapi.kit.bodylimit import SMALL_BODY, body_limit
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import QUERY_SYSTEM_ID, query_enum
from solarapi.kit.pagination import PageDep, page_response
from solarapi.kit.timefmt import utcnow

router = APIRouter(tags=["Declarations"])

_PATH = "/declarations/{declaration_id}"


def _conflict(when: str) -> dict[int | str, dict[str, Any]]:
    return {
        409: {
            "description": when,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    }


_NOT_A_DRAFT = "The declaration is not a draft (the message names its status)"
_IDEMPOTENCY = "; or an Idempotency-Key reused with a different request or still in flight"


def _location(declaration_id: str) -> str:
    return f"/api/v1/declarations/{declaration_id}"


@router.post(
    "/declarations",
    status_code=201,
    response_model=DeclarationOut,
    summary="Create a draft declaration",
    description=(
        "The period may still lack readings: the draft then has `coverage` 0 and null "
        "energies. Submitting needs coverage ≥ 0.95."
    ),
    responses=_conflict(
        "The period overlaps a draft, submitted or approved declaration" + _IDEMPOTENCY
    ),
)
@body_limit(SMALL_BODY)
async def create_declaration(
    body: DeclarationCreate, principal: PrincipalDep, session: SessionDep
) -> Response:
    declaration = await service.create_declaration(
        session, principal, body, utcnow(), actor=principal.key_id
    )
    return OrjsonResponse(
        declaration.render(),
        status_code=201,
        headers={"Location": _location(declaration.id)},
    )


@router.get("/declarations", response_model=DeclarationPage, summary="List declarations")
async def list_declarations(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    page: PageDep,
    system_id: Annotated[
        str | None, Query(description="Only this system's"), QUERY_SYSTEM_ID
    ] = None,
    status: Annotated[
        str | None,
        Query(description="draft, submitted, approved, rejected or withdrawn"),
        query_enum(DeclarationStatus),
    ] = None,
    declaration_type: Annotated[
        str | None,
        Query(alias="type", description="guarantee_of_origin, production_subsidy or feed_in"),
        query_enum(DECLARATION_TYPES),
    ] = None,
) -> Response:
    rows, total = await service.list_declarations(
        session,
        principal,
        system_id=system_id,
        status=status or None,
        declaration_type=declaration_type or None,
        offset=page.offset,
        limit=page.limit,
    )
    return page_response(request, [d.render() for d in rows], total, page)


@router.get(_PATH, response_model=DeclarationOut, summary="Get a declaration")
async def get_declaration(
    declaration_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    declaration = await service.get_declaration(session, principal, declaration_id)
    return OrjsonResponse(declaration.render())


@router.patch(
    _PATH,
    response_model=DeclarationOut,
    summary="Change a draft (energy_wh, period, reference)",
    responses=_conflict(f"{_NOT_A_DRAFT}, or the new period overlaps another declaration"),
)
@body_limit(SMALL_BODY)
async def update_declaration(
    declaration_id: str, body: DeclarationUpdate, principal: PrincipalDep, session: SessionDep
) -> Response:
    declaration = await service.update_declaration(
        session, principal, declaration_id, body, utcnow(), actor=principal.key_id
    )
    return OrjsonResponse(declaration.render())


@router.delete(_PATH, status_code=204, summary="Delete a draft", responses=_conflict(_NOT_A_DRAFT))
async def delete_declaration(
    declaration_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    await service.delete_declaration(session, principal, declaration_id)
    return Response(status_code=204)


@router.post(
    f"{_PATH}/submit",
    response_model=DeclarationOut,
    summary="Submit a draft to the issuing body (decided at once in the sandbox)",
    responses=_conflict(f"{_NOT_A_DRAFT}, or coverage is below 0.95{_IDEMPOTENCY}"),
)
@body_limit(SMALL_BODY)
async def submit_declaration(
    declaration_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    declaration = await service.submit_declaration(
        session, principal, declaration_id, utcnow(), actor=principal.key_id
    )
    return OrjsonResponse(declaration.render())


@router.post(
    f"{_PATH}/withdraw",
    response_model=DeclarationOut,
    summary="Withdraw a submitted declaration",
    responses=_conflict(
        "The declaration is not submitted (the message names its status)" + _IDEMPOTENCY
    ),
)
@body_limit(SMALL_BODY)
async def withdraw_declaration(
    declaration_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    declaration = await service.withdraw_declaration(
        session, principal, declaration_id, utcnow(), actor=principal.key_id
    )
    return OrjsonResponse(declaration.render())


@router.get(
    f"{_PATH}/history",
    response_model=HistoryOut,
    summary="The declaration's transitions, oldest first",
)
async def declaration_history(
    declaration_id: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    transitions = await service.history(session, principal, declaration_id)
    return OrjsonResponse({"data": [t.render() for t in transitions]})
