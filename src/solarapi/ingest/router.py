"""HTTP endpoints of ingest tokens: managing them (Enterprise keys) and the one upload a
token may make. Request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from solarapi.audit.service import Actor
from solarapi.auth.principal import INGEST_CALLER, IngestCaller, PrincipalDep
from solarapi.db import RequestSession, SessionDep
from solarapi.errors import Unauthorized, ValidationFailed
from solarapi.idempotency.middleware import replay_without
from solarapi.ingest import service
from solarapi.ingest.schemas import TokenCreate, TokenCreatedOut, TokenList, TokenOut
from solarapi.kit.bodylimit import SMALL_BODY, UPLOAD_BODY, body_limit
from solarapi.kit.clientip import client_ip
from solarapi.kit.direct_endpoints import direct
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.timefmt import utcnow
from solarapi.readings.schemas import UPLOAD_SCHEMA, UploadResultOut
from solarapi.readings.upload import batch_from_json, refuse_duplicate_keys
from solarapi.state import SettingsDep

router = APIRouter(tags=["Ingest tokens"])


async def get_ingest_caller(request: Request) -> IngestCaller:
    caller = request.scope.get("state", {}).get(INGEST_CALLER)
    if not isinstance(caller, IngestCaller):
        # Only the gateway authenticates tokens; reaching here without it is a wiring bug.
        raise Unauthorized("missing Authorization header")
    return caller


IngestCallerDep = Annotated[IngestCaller, Depends(get_ingest_caller)]


@router.post(
    "/systems/{system_id}/ingest-tokens",
    status_code=201,
    response_model=TokenCreatedOut,
    summary="Create an ingest token for a system's data logger (shown once)",
    description=(
        "The token (`ik_…`) may only `POST /api/v1/ingest/readings` for this system, at most "
        "60 requests per minute of its own. It appears in this answer only: a replay of the "
        "same request (`Idempotency-Key`) answers without it."
    ),
    responses={
        409: {
            "description": "The system is simulated (`conflict`): it takes no upload, so no token"
        }
    },
)
@body_limit(SMALL_BODY)
async def create_token(
    request: Request,
    system_id: str,
    body: TokenCreate,
    principal: PrincipalDep,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    created = await service.create_token(
        session,
        principal,
        system_id,
        body.name,
        settings.effective_secret_key,
        utcnow(),
        actor=Actor.key(principal.key_id),
        ip=client_ip(request.scope, settings.trusted_networks),
    )
    replay_without(request, "token")  # shown once: a replay answers without it
    return OrjsonResponse(TokenCreatedOut.created(created).model_dump(), status_code=201)


@router.get(
    "/systems/{system_id}/ingest-tokens",
    response_model=TokenList,
    summary="A system's ingest tokens that work (without the tokens themselves)",
)
async def list_tokens(system_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    views = await service.list_tokens(session, principal, system_id)
    return OrjsonResponse({"data": [TokenOut.of(view).model_dump() for view in views]})


@router.delete(
    "/systems/{system_id}/ingest-tokens/{token_id}",
    status_code=204,
    summary="Revoke an ingest token (its next use → 401)",
)
async def revoke_token(
    request: Request,
    system_id: str,
    token_id: str,
    principal: PrincipalDep,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    await service.revoke_token(
        session,
        principal,
        system_id,
        token_id,
        utcnow(),
        actor=Actor.key(principal.key_id),
        ip=client_ip(request.scope, settings.trusted_networks),
    )
    return Response(status_code=204)


@router.post(
    "/ingest/readings",
    response_model=UploadResultOut,
    summary="A data logger's upload of its system's readings (ingest token only)",
    description=(
        "`Authorization: Bearer ik_…`. The body of `POST /systems/{id}/readings`, for the "
        "token's system: same rules, all or nothing, idempotent, `readings.uploaded` event. "
        "60 requests per minute per token, outside the account's windows. An API key here, "
        "or an ingest token anywhere else → 401."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": UPLOAD_SCHEMA}},
        }
    },
)
@body_limit(UPLOAD_BODY)
@direct
async def ingest_readings(request: Request) -> Response:
    # Called by the gateway directly (`kit.direct_endpoints`) unless the request carries an
    # Idempotency-Key, as the API's upload is.
    caller = await get_ingest_caller(request)
    raw = await request.body()
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None
    batch = batch_from_json(payload)
    # The gateway checks keys given twice only in bodies up to 256 KiB; above, as the API's
    # upload does (orjson keeps the last of a repeated key: a reading stored altered).
    refuse_duplicate_keys(raw, payload)
    async with RequestSession(request) as session:
        result = await service.upload(session, caller, batch, utcnow())
    return OrjsonResponse(result.to_api())
