"""Response shapes of the prices area, for the OpenAPI document (the answers are rendered by
`prices.rendering` and `prices.market_value.render`; tests/contract/test_documented_responses.py
checks the bytes against these)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from solarapi.kit.openapi_fields import Instant


class ZoneOut(BaseModel):
    code: str = Field(examples=["NL"])
    name: str = Field(examples=["Netherlands"])
    eic: str = Field(
        description="ENTSO-E EIC code of the bidding zone", examples=["10YNL----------L"]
    )
    timezone: str = Field(description="IANA time zone of the zone's calendar (`1d` buckets)")
    currency: str = Field(examples=["EUR"])


class ZoneList(BaseModel):
    data: list[ZoneOut]


class PriceBucket(BaseModel):
    start: Instant = Field(examples=["2025-06-15T10:00:00Z"])
    end: Instant = Field(examples=["2025-06-15T11:00:00Z"])
    price_eur_per_mwh: float | None = Field(
        description="Time-weighted mean of the prices covering the bucket; null without a "
        "price. May be negative.",
        examples=[87.41],
    )


class PriceTotals(BaseModel):
    mean_price_eur_per_mwh: float | None = Field(
        description="Time-weighted mean over the priced quarter-hours of the widened range "
        "(the baseload price); null without a price"
    )
    min_price_eur_per_mwh: float | None
    max_price_eur_per_mwh: float | None
    priced_quarter_hours: int
    negative_quarter_hours: int


class PriceMeta(BaseModel):
    zone: str
    interval: Literal["15m", "1h", "1d", "1w", "1M"]
    from_: Instant = Field(alias="from")
    to: Instant
    currency: Literal["EUR"]
    unit: Literal["MWh"]
    source: Literal["entsoe", "csv", "simulated"] | None = Field(
        description="Where the prices come from: the source covering most of the range "
        "(live), `simulated` (sandbox); null when the range has no price"
    )
    totals: PriceTotals


class PriceSeries(BaseModel):
    data: list[PriceBucket]
    meta: PriceMeta


class ValueBucket(BaseModel):
    start: Instant
    end: Instant
    energy_wh: float | None = Field(description="Production in the bucket; null without readings")
    price_eur_per_mwh: float | None = Field(
        description="Volume-weighted price of the bucket's production (its value ÷ its "
        "priced energy); the time-weighted mean price when it produced nothing; null "
        "without a price"
    )
    value_eur: float | None = Field(
        description="Sum over the bucket's quarter-hours of energy × price; null where no "
        "quarter-hour has both"
    )


class ValueTotals(BaseModel):
    energy_wh: float | None
    value_eur: float | None
    price_eur_per_mwh: float | None = Field(description="Volume-weighted over the range")
    priced_energy_wh: float = Field(description="Production in quarter-hours with a price")
    capture_price_eur_per_mwh: float | None = Field(
        description="value_eur ÷ priced_energy_wh × 10⁶: the production-weighted price"
    )
    baseload_price_eur_per_mwh: float | None = Field(
        description="The zone's time-weighted mean price over the priced quarter-hours"
    )
    capture_rate: float | None = Field(
        description="capture ÷ baseload; null when the baseload price is ≤ 0 or unknown"
    )
    negative_price_energy_wh: float = Field(
        description="Production in quarter-hours whose price is below zero"
    )
    negative_price_value_eur: float = Field(description="Its value (≤ 0)")


class ValueMeta(BaseModel):
    system_id: str
    market_zone: str
    interval: Literal["15m", "30m", "1h", "1d", "1w", "1M"]
    timezone: str
    from_: Instant = Field(alias="from")
    to: Instant
    currency: Literal["EUR"]
    source: Literal["entsoe", "csv", "simulated"] | None
    totals: ValueTotals


class MarketValueSeries(BaseModel):
    data: list[ValueBucket]
    meta: ValueMeta
