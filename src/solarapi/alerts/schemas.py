"""Response bodies of the alerts endpoints (the OpenAPI documentation of `rendering.render`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from solarapi.kit.openapi_fields import Instant
from solarapi.kit.pagination import Pagination

AlertTypeName = Literal["system.offline", "system.zero_production", "system.underperforming"]


class AlertOut(BaseModel):
    id: str = Field(examples=["alr_01JD5Z8W3Q9V6T2K4M7N1P0R8S"])
    system_id: str
    type: AlertTypeName
    status: Literal["open", "resolved"]
    opened_at: Instant
    resolved_at: Instant | None
    environment: Literal["live", "test"]
    evidence: dict[str, Any] = Field(
        description="The numbers that decided the alert (per type, see docs/alerts.md); once "
        "resolved, `resolution` holds those that resolved it"
    )


class AlertPage(BaseModel):
    data: list[AlertOut]
    pagination: Pagination
