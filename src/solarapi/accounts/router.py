"""`GET /account`: which key, plan and environment a client is using."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep, request_usage
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import Instant
from solarapi.kit.plans import PLAN_LIMITS
from solarapi.kit.timefmt import format_optional, format_timestamp

router = APIRouter(tags=["Account"])


class KeyInfo(BaseModel):
    id: str
    name: str
    display: str
    created_at: Instant
    last_used_at: Instant | None


class Limits(BaseModel):
    per_minute: int
    per_day: int


class Usage(BaseModel):
    minute: int
    today: int


class AccountOut(BaseModel):
    id: str
    name: str
    plan: Literal["starter", "pro", "enterprise"]
    environment: Literal["live", "test"]
    key: KeyInfo
    limits: Limits
    usage: Usage


@router.get("/account", response_model=AccountOut, summary="The calling key's account")
async def get_account(principal: PrincipalDep, request: Request) -> Response:
    limits = PLAN_LIMITS[principal.plan]
    minute, today = request_usage(request)
    return OrjsonResponse(
        {
            "id": principal.account_id,
            "name": principal.account_name,
            "plan": principal.plan.value,
            "environment": principal.environment.value,
            "key": {
                "id": principal.key_id,
                "name": principal.key_name,
                "display": principal.key_display,
                "created_at": format_timestamp(principal.key_created_at),
                "last_used_at": format_optional(principal.key_last_used_at),
            },
            "limits": {"per_minute": limits.per_minute, "per_day": limits.per_day},
            "usage": {"minute": minute, "today": today},
        }
    )
