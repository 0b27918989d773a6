"""Request and response bodies of the performance endpoints (also the OpenAPI documentation)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from solarapi.kit.openapi_fields import Instant

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Flag = Literal["gap", "clipping", "stuck", "outlier", "time_shift"]
SourceName = Literal["sensor", "satellite", "typical", "mixed"]


class IrradianceItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timestamp: Annotated[
        str,
        Field(
            strict=True,
            description="Start of the 15-minute interval, RFC 3339 with a zone",
            examples=["2025-06-15T10:15:00Z"],
        ),
    ]
    poa_w_m2: Annotated[Number, Field(description="Plane-of-array irradiance, 0 … 1,500 W/m²")]
    module_temp_c: Annotated[Number | None, Field(description="Optional, −50 … 100 °C")] = None
    ambient_temp_c: Annotated[Number | None, Field(description="Optional, −50 … 100 °C")] = None


class StoredIrradiance(BaseModel):
    timestamp: Instant
    source: Literal["sensor", "satellite"]
    poa_w_m2: float | None
    module_temp_c: float | None
    ambient_temp_c: float | None
    ghi_w_m2: float | None
    dni_w_m2: float | None
    dhi_w_m2: float | None


class IrradianceListOut(BaseModel):
    data: list[StoredIrradiance]


class PerformanceFigures(BaseModel):
    energy_wh: float | None
    expected_energy_wh: float | None
    insolation_wh_m2: float | None
    irradiance_source: SourceName | None
    specific_yield_kwh_kwp: float | None
    reference_yield_h: float | None
    performance_ratio: float | None
    performance_ratio_temperature_corrected: float | None
    energy_performance_index: float | None
    samples: int
    expected_samples: int
    coverage: float
    quality: list[Flag]


class PerformanceBucket(PerformanceFigures):
    start: Instant
    end: Instant


class ModelOut(BaseModel):
    name: Literal["pvwatts"]
    library: str
    capacity_kwp: float
    inverter_capacity_kw: float | None
    latitude: float
    longitude: float
    tilt_deg: float
    azimuth_deg: float
    orientation_defaults: list[Literal["tilt_deg", "azimuth_deg"]]
    gamma_pdc_pct_per_c: float
    losses_pct: float
    inverter_efficiency: float
    overrides: list[Literal["gamma_pdc_pct_per_c", "losses_pct", "inverter_efficiency"]]
    transposition: Literal["haydavies"]
    albedo: float
    solar_position: str
    evaluated_at: str
    cell_temperature: Literal["sapm"]
    sapm_mount: str
    sapm_a: float
    sapm_b: float
    sapm_delta_t_c: float
    wind_speed_m_s: float
    clear_sky: str
    typical_climate: str | None


class PerformanceMeta(BaseModel):
    system_id: str
    interval: Literal["1d", "1w", "1M"]
    timezone: str
    from_: Annotated[Instant, Field(alias="from")]
    to: Instant
    totals: PerformanceFigures
    model: ModelOut


class PerformanceOut(BaseModel):
    data: list[PerformanceBucket]
    meta: PerformanceMeta
