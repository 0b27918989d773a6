"""Response bodies of the portfolio endpoints (the OpenAPI documentation)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from solarapi.prices.schemas import ValueBucket
from solarapi.readings.schemas import Bucket, Totals
from solarapi.systems.schemas import SummaryOut


class FleetPage(BaseModel):
    """The envelope's `pagination` of a portfolio answer: pages of systems, up to 1,000."""

    page: Annotated[int, Field(ge=1)]
    limit: Annotated[int, Field(ge=1, le=1_000)]
    total: Annotated[int, Field(ge=0)]
    total_pages: Annotated[int, Field(ge=0)]
    has_more: bool


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
    pagination: FleetPage


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
    pagination: FleetPage


class SystemValueTotals(BaseModel):
    """`meta.totals` of `/systems/{id}/market-value` (all null for a system without a zone)."""

    energy_wh: float | None
    value_eur: float | None
    price_eur_per_mwh: float | None
    priced_energy_wh: float | None
    capture_price_eur_per_mwh: float | None
    baseload_price_eur_per_mwh: float | None
    capture_rate: float | None
    negative_price_energy_wh: float | None
    negative_price_value_eur: float | None


class SystemValue(BaseModel):
    system_id: str
    market_zone: str | None
    timezone: str
    from_: Annotated[str, Field(alias="from")]
    to: str
    currency: Literal["EUR"] | None
    source: Literal["entsoe", "csv", "simulated"] | None
    data: list[ValueBucket] = Field(description="Empty for a system without a market zone")
    totals: SystemValueTotals


class ZoneValueTotals(BaseModel):
    energy_wh: float | None
    priced_energy_wh: float
    value_eur: float | None
    capture_price_eur_per_mwh: float | None
    baseload_price_eur_per_mwh: float | None = Field(
        description="Null in `meta.totals` when the systems lie in several zones"
    )
    capture_rate: float | None
    negative_price_energy_wh: float
    negative_price_value_eur: float
    systems: int


class ZoneValue(ZoneValueTotals):
    zone: str


class FleetValueMeta(BaseModel):
    interval: Literal["15m", "30m", "1h", "1d", "1w", "1M"]
    from_: Annotated[str, Field(alias="from")]
    to: str
    currency: Literal["EUR"]
    zones: list[ZoneValue]
    totals: ZoneValueTotals


class FleetValueOut(BaseModel):
    data: list[SystemValue]
    meta: FleetValueMeta
    pagination: FleetPage
