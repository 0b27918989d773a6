"""The health endpoint."""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import version
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from solarapi.dbfaults import (
    SCHEMA_REVISION,
    is_database_unavailable,
    revision_is_current,
    schema_revision,
)
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.timefmt import format_timestamp, utcnow
from solarapi.kit.version import API_VERSION

router = APIRouter(tags=["Health"])
# Looked up once: importlib.metadata scans the installed distributions on every call.
_VERSION = version("solarapi")
log = logging.getLogger("solarapi.health")


class HealthChecks(BaseModel):
    database: Literal["ok", "unavailable"]
    rate_limiter: Literal["ok", "degraded"]


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    version: str
    api_version: str
    time: str
    checks: HealthChecks


async def _database_status(request: Request) -> Literal["ok", "unavailable"]:
    """ "ok" only when the API could serve: the database answers and its schema is this
    release's (an empty or unmigrated database fails every API request, so it is not ok)."""
    try:
        revision = await asyncio.wait_for(schema_revision(request.app.state.engine), 2.0)
    except Exception as exc:
        if not (is_database_unavailable(exc) or isinstance(exc, asyncio.TimeoutError)):
            log.exception("health check query failed")
        return "unavailable"
    if not revision_is_current(revision):
        log.error(
            "database schema at revision %s, this release needs %s: run `solarapi migrate`",
            revision,
            SCHEMA_REVISION,
        )
        return "unavailable"
    return "ok"


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
    database = await _database_status(request)
    limiter = await request.app.state.limiter.check()
    status = "unavailable" if database != "ok" else ("degraded" if limiter != "ok" else "ok")
    body = {
        "status": status,
        "version": _VERSION,
        "api_version": API_VERSION,
        "time": format_timestamp(utcnow()),
        "checks": {"database": database, "rate_limiter": limiter},
    }
    headers = {"Cache-Control": "no-store"}
    if status == "unavailable":
        headers["Retry-After"] = "5"
    return OrjsonResponse(
        body, status_code=503 if status == "unavailable" else 200, headers=headers
    )
