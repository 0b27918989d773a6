"""Response bodies of the portfolio endpoints (the OpenAPI documentation)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from solarapi.kit.pagination import Pagination
from solarapi.readings.schemas import Bucket, Totals
from solarapi.systems.schemas import SummaryOut


class SystemReadings(BaseModel):
    system_id: str
    timezone: str
    from_: Annotated[str, Field(alias="from", description="This system's widened range")]
    to: str
    data: list[Bucket]
    totals: Totals


class FleetReadingsTotals(BaseModel):
    energy_wh: float | None
    samples: int
    expected_samples: int
    systems: int = Field(description="Every system that matches the filters (not the page)")
    systems_with_data: int


class FleetReadingsMeta(BaseModel):
    interval: Literal["15m", "30m", "1h", "1d", "1w", "1M"]
    from_: Annotated[str, Field(alias="from", description="The request's `from`")]
    to: str
    totals: FleetReadingsTotals


class FleetReadingsOut(BaseModel):
    data: list[SystemReadings]
    meta: FleetReadingsMeta
    pagination: Pagination


class SystemSummary(SummaryOut):
    system_id: str


class FleetSummaryTotals(BaseModel):
    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    capacity_kwp: float
    systems: int
    systems_reporting_today: int
    specific_yield_today_kwh_kwp: float | None


class FleetSummaryMeta(BaseModel):
    totals: FleetSummaryTotals


class FleetSummaryOut(BaseModel):
    data: list[SystemSummary]
    meta: FleetSummaryMeta
    pagination: Pagination
