"""Request body and response shapes of reports (the OpenAPI documentation; the handlers
return plain dicts built by `service.report_to_api`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from solarapi.kit.pagination import Pagination

ReportType = Literal["production", "market_value", "declarations"]
ReportFormat = Literal["csv", "pdf"]


class ReportCreate(BaseModel):
    # Values are checked by the service, so every 400 names the field and the allowed values
    # in the API's own words; the model only fixes the shape and refuses unknown fields.
    model_config = ConfigDict(extra="forbid", populate_by_name=False)

    type: str = Field(description="production, market_value or declarations")
    format: str = Field(description="csv or pdf")
    system_ids: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=40)]], Field(max_length=500)]
        | None
    ) = Field(default=None, description="Default: every system of the key's environment")
    from_: str | None = Field(
        default=None, alias="from", description="Start, RFC 3339 with a zone (inclusive)"
    )
    to: str | None = Field(default=None, description="End, RFC 3339 with a zone (exclusive)")
    interval: str | None = Field(
        default=None,
        description="Bucket size for production and market_value: 15m, 30m, 1h, 1d (default), "
        "1w or 1M",
    )


class ReportFile(BaseModel):
    content_type: str
    size_bytes: int
    sha256: str


class ReportOut(BaseModel):
    id: str
    type: ReportType
    format: ReportFormat
    status: Literal["queued", "running", "completed", "failed"]
    parameters: dict[str, object]
    created_at: str
    started_at: str | None
    completed_at: str | None
    expires_at: str | None
    error: str | None
    file: ReportFile | None
    download_url: str | None


class ReportList(BaseModel):
    data: list[ReportOut]
    pagination: Pagination
