"""Request body and response shapes of reports (the OpenAPI documentation; the handlers
return plain dicts built by `service.report_to_api`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from solarapi.kit.openapi_fields import TimeZoneName, enum_schema
from solarapi.kit.pagination import Pagination
from solarapi.models.reports import ReportFormat, ReportKind, ReportStatus

KINDS_TEXT = ", ".join(kind.value for kind in ReportKind)
FORMATS_TEXT = ", ".join(fmt.value for fmt in ReportFormat)


class ReportCreate(BaseModel):
    # Values are checked by `ReportParameters.from_request`, so every 400 names the field and
    # the allowed values in the API's own words; the model only fixes the shape and refuses
    # unknown fields.
    model_config = ConfigDict(extra="forbid", populate_by_name=False)

    type: Annotated[str, enum_schema(ReportKind)] = Field(description=KINDS_TEXT)
    format: Annotated[str, enum_schema(ReportFormat)] = Field(description=FORMATS_TEXT)
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
    timezone: TimeZoneName | None = Field(
        default=None,
        description="The report's calendar: an IANA time zone name of the tz database. Its "
        "buckets, period, file name and `period_local` follow it. Default: the systems' own "
        "zone when their clocks agree over the whole period (Europe/Amsterdam and "
        "Europe/Berlin do); required when they do not (400 otherwise).",
    )


class ReportParametersOut(BaseModel):
    """The request, normalised: system ids resolved, timestamps in UTC, the calendar chosen."""

    model_config = ConfigDict(populate_by_name=True)

    system_ids: list[str]
    from_: str = Field(alias="from")
    to: str
    interval: str | None = Field(default=None, description="Absent for declarations reports")
    timezone: str | None = Field(
        default=None,
        description="The report's calendar: the caller's `timezone`, else the systems' own "
        "zone (absent on reports requested before 2026-11-26)",
    )


class ReportFile(BaseModel):
    content_type: str
    size_bytes: int
    sha256: str


class ReportOut(BaseModel):
    id: str
    type: ReportKind
    format: ReportFormat
    status: ReportStatus
    parameters: ReportParametersOut
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
