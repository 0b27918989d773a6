"""The health endpoint."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from solarapi.health.service import health_response, live_response
from solarapi.kit.openapi_fields import Instant

router = APIRouter(tags=["Health"])


class HealthChecks(BaseModel):
    database: Literal["ok", "unavailable"]
    rate_limiter: Literal["ok", "degraded"]


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    version: str
    api_version: str
    tzdata: str = Field(
        description="The IANA tz database release every local calendar follows (the "
        "`tzdata` package shipped with the service, never the host's files)",
        examples=["2026f"],
    )
    time: Instant
    checks: HealthChecks


@router.head("/health", include_in_schema=False)
@router.get(
    "/health",
    response_model=Health,
    summary="Service health",
    description="No authentication. 200 `ok` or `degraded` (Redis down: limits fall back to "
    "per-process counters), 503 `unavailable` when the database cannot serve the API: it "
    "does not answer, refuses connections, or its schema is not migrated.",
    responses={503: {"model": Health, "description": "The database does not answer"}},
)
async def health(request: Request) -> Response:
    # The gateway answers /health itself before the app runs (see ApiGateway); this route
    # documents it and answers the same for an app mounted without the gateway.
    return health_response(await request.app.state.health.checks())


class Live(BaseModel):
    status: Literal["ok"]


@router.head("/health/live", include_in_schema=False)
@router.get(
    "/health/live",
    response_model=Live,
    summary="Liveness",
    description="No authentication, never counted in a rate-limit window. 200 `ok` as long as "
    "the process serves requests, whatever the database or Redis say: the liveness check, so "
    "an orchestrator never restarts a healthy worker because the database blinked. "
    "`/health` is the readiness check.",
)
async def live() -> Response:
    # The gateway answers it before the app runs; this route documents it.
    return live_response()
