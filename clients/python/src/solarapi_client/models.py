"""Typed, read-only objects for every resource of the API.

Timestamps are timezone-aware `datetime`s in UTC and calendar days are `date`s. Fields the
server adds later (v1 only grows) are ignored, so an older client keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal

from solarapi_client.timeseries import to_dataframe

if TYPE_CHECKING:  # pandas is optional: only type checkers need it here
    import pandas as pd

Plan = Literal["starter", "pro", "enterprise"]
Environment = Literal["live", "test"]
SystemStatus = Literal["active", "inactive", "decommissioned"]
DataSource = Literal["metered", "simulated"]
Interval = Literal["15m", "30m", "1h", "1d", "1w", "1M"]
PriceInterval = Literal["15m", "1h", "1d", "1w", "1M"]
PriceSource = Literal["entsoe", "csv", "simulated"]
DeclarationType = Literal["guarantee_of_origin", "production_subsidy", "feed_in"]
DeclarationStatus = Literal["draft", "submitted", "approved", "rejected", "withdrawn"]
TransitionAction = Literal["create", "update", "delete", "submit", "withdraw", "approve", "reject"]
ReportType = Literal["production", "market_value", "declarations"]
ReportFormat = Literal["csv", "pdf"]
ReportStatus = Literal["queued", "running", "completed", "failed"]
WebhookStatus = Literal["enabled", "disabled"]
AlertType = Literal["system.offline", "system.zero_production", "system.underperforming"]
AlertStatus = Literal["open", "resolved"]
EventType = Literal[
    "report.completed",
    "report.failed",
    "declaration.submitted",
    "declaration.approved",
    "declaration.rejected",
    "declaration.withdrawn",
    "system.created",
    "system.updated",
    "system.deleted",
    "readings.uploaded",
    "alert.opened",
    "alert.resolved",
]


# --- health and account -------------------------------------------------------------------


@dataclass(frozen=True)
class HealthChecks:
    database: Literal["ok", "unavailable"]
    rate_limiter: Literal["ok", "degraded"]


@dataclass(frozen=True)
class Health:
    status: Literal["ok", "degraded", "unavailable"]
    version: str
    api_version: str
    time: datetime
    checks: HealthChecks
    tzdata: str | None = None  # the time zone database's release (2026-11-25), e.g. "2026f"


@dataclass(frozen=True)
class Liveness:
    """`GET /health/live`: the process serves requests (whatever the database says)."""

    status: Literal["ok"]


@dataclass(frozen=True)
class KeyInfo:
    id: str
    name: str
    display: str
    created_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True)
class Limits:
    per_minute: int
    per_day: int


@dataclass(frozen=True)
class Usage:
    minute: int
    today: int


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    plan: Plan
    environment: Environment
    key: KeyInfo
    limits: Limits
    usage: Usage


# --- systems ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    latitude: float
    longitude: float
    timezone: str
    country: str | None = None


@dataclass(frozen=True)
class Orientation:
    tilt_deg: float
    azimuth_deg: float


@dataclass(frozen=True)
class ModelParameters:
    gamma_pdc_pct_per_c: float
    losses_pct: float
    inverter_efficiency: float


@dataclass(frozen=True)
class Monitoring:
    """The alert rules' settings of a system (`monitoring`, Enterprise to change)."""

    enabled: bool
    # Daylight hours without a new reading before `system.offline` opens.
    offline_after_hours: int
    # `system.underperforming` opens when the 7-day energy performance index stays below it.
    underperformance_threshold: float


@dataclass(frozen=True)
class System:
    id: str
    name: str
    status: SystemStatus
    environment: Environment
    data_source: DataSource
    capacity_kwp: float
    inverter_capacity_kw: float | None
    location: Location
    orientation: Orientation
    market_zone: str | None
    installed_on: date | None
    first_reading_at: datetime | None
    last_reading_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # The performance model's parameters in force (servers before it: None).
    model: ModelParameters | None = None
    # The alert rules' settings (servers before alerts: None).
    monitoring: Monitoring | None = None


@dataclass(frozen=True)
class Summary:
    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    last_power_w: float | None
    last_reading_at: datetime | None


# --- readings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """One 15-minute reading to upload; `timestamp` is the interval's start (aware datetime)."""

    timestamp: datetime
    energy_wh: float
    power_w: float | None = None


@dataclass(frozen=True)
class UploadResult:
    received: int
    inserted: int
    updated: int


@dataclass(frozen=True)
class ReadingBucket:
    start: datetime
    end: datetime
    energy_wh: float | None
    power_avg_w: float | None
    power_max_w: float | None
    samples: int
    expected_samples: int


@dataclass(frozen=True)
class ReadingTotals:
    energy_wh: float | None
    power_max_w: float | None
    samples: int
    expected_samples: int


@dataclass(frozen=True)
class ReadingsMeta:
    system_id: str
    interval: Interval
    timezone: str
    from_: datetime
    to: datetime
    totals: ReadingTotals


@dataclass(frozen=True)
class ReadingSeries:
    data: list[ReadingBucket]
    meta: ReadingsMeta

    def to_dataframe(self, tz: str | None = None) -> pd.DataFrame:
        """The buckets as a pandas DataFrame indexed by bucket start (tz-aware; UTC unless
        `tz` names another zone, e.g. `series.meta.timezone`). Needs the `pandas` extra."""
        return to_dataframe(self.data, tz)


# --- market prices and market value -------------------------------------------------------


@dataclass(frozen=True)
class Zone:
    code: str
    name: str
    eic: str
    timezone: str
    currency: str


@dataclass(frozen=True)
class PriceBucket:
    start: datetime
    end: datetime
    price_eur_per_mwh: float | None


@dataclass(frozen=True)
class PriceTotals:
    """A zone's prices over the widened range, at quarter-hour resolution (the baseload)."""

    mean_price_eur_per_mwh: float | None
    min_price_eur_per_mwh: float | None
    max_price_eur_per_mwh: float | None
    priced_quarter_hours: int
    negative_quarter_hours: int


@dataclass(frozen=True)
class PriceMeta:
    zone: str
    interval: PriceInterval
    from_: datetime
    to: datetime
    currency: str
    unit: str
    source: PriceSource | None
    totals: PriceTotals | None = None  # None from a server before 2026-11-25


@dataclass(frozen=True)
class PriceSeries:
    data: list[PriceBucket]
    meta: PriceMeta

    def to_dataframe(self, tz: str | None = None) -> pd.DataFrame:
        """The buckets as a pandas DataFrame (see `ReadingSeries.to_dataframe`)."""
        return to_dataframe(self.data, tz)


@dataclass(frozen=True)
class ValueBucket:
    start: datetime
    end: datetime
    energy_wh: float | None
    price_eur_per_mwh: float | None
    value_eur: float | None


@dataclass(frozen=True)
class TraderFigures:
    """A market value's energy, its value, and the trader's figures over the widened range at
    quarter-hour resolution (None where undefined, or from a server before 2026-11-25): of a
    system (`ValueTotals`), or of a zone's systems or a fleet (`fleet.ZoneValueTotals`)."""

    energy_wh: float | None
    value_eur: float | None
    priced_energy_wh: float | None = None
    capture_price_eur_per_mwh: float | None = None
    baseload_price_eur_per_mwh: float | None = None
    capture_rate: float | None = None
    negative_price_energy_wh: float | None = None
    negative_price_value_eur: float | None = None


@dataclass(frozen=True)
class ValueTotals(TraderFigures):
    """A system's market value totals: the trader's figures and `price_eur_per_mwh` (the
    production-weighted price, the capture price under its first name)."""

    price_eur_per_mwh: float | None = None


@dataclass(frozen=True)
class ValueMeta:
    system_id: str
    market_zone: str
    interval: Interval
    timezone: str
    from_: datetime
    to: datetime
    currency: str
    source: PriceSource | None
    totals: ValueTotals


@dataclass(frozen=True)
class MarketValueSeries:
    data: list[ValueBucket]
    meta: ValueMeta

    def to_dataframe(self, tz: str | None = None) -> pd.DataFrame:
        """The buckets as a pandas DataFrame (see `ReadingSeries.to_dataframe`)."""
        return to_dataframe(self.data, tz)


# --- performance ---------------------------------------------------------------------------

PerformanceInterval = Literal["1d", "1w", "1M"]
QualityFlag = Literal["gap", "clipping", "stuck", "outlier", "time_shift"]


@dataclass(frozen=True)
class PerformanceFigures:
    energy_wh: float | None
    expected_energy_wh: float | None
    insolation_wh_m2: float | None
    irradiance_source: Literal["sensor", "satellite", "typical", "mixed"] | None
    specific_yield_kwh_kwp: float | None
    reference_yield_h: float | None
    performance_ratio: float | None
    performance_ratio_temperature_corrected: float | None
    energy_performance_index: float | None
    samples: int
    expected_samples: int
    coverage: float
    quality: list[QualityFlag]


@dataclass(frozen=True)
class PerformanceBucket(PerformanceFigures):
    start: datetime
    end: datetime


@dataclass(frozen=True)
class PerformanceMeta:
    system_id: str
    interval: PerformanceInterval
    timezone: str
    from_: datetime
    to: datetime
    totals: PerformanceFigures
    model: dict[str, Any]  # every parameter the model used (see docs/performance.md)


@dataclass(frozen=True)
class PerformanceSeries:
    data: list[PerformanceBucket]
    meta: PerformanceMeta

    def to_dataframe(self, tz: str | None = None) -> pd.DataFrame:
        """The buckets as a pandas DataFrame (see `ReadingSeries.to_dataframe`)."""
        return to_dataframe(self.data, tz)


@dataclass(frozen=True)
class IrradianceReading:
    """One uploaded quarter-hour: mean plane-of-array irradiance and optional temperatures."""

    timestamp: datetime | str
    poa_w_m2: float
    module_temp_c: float | None = None
    ambient_temp_c: float | None = None


@dataclass(frozen=True)
class StoredIrradiance:
    timestamp: datetime
    source: Literal["sensor", "satellite"]
    poa_w_m2: float | None
    module_temp_c: float | None
    ambient_temp_c: float | None
    ghi_w_m2: float | None
    dni_w_m2: float | None
    dhi_w_m2: float | None


@dataclass(frozen=True)
class IrradianceList:
    data: list[StoredIrradiance]


# --- declarations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    id: str
    system_id: str
    type: DeclarationType
    period_start: date
    period_end: date
    energy_wh: float | None  # None while the period has no readings and none was stated
    metered_energy_wh: float | None  # None while the period has no reading at all
    coverage: float
    certificates: int | None
    status: DeclarationStatus
    status_reason: str | None
    reference: str | None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    decided_at: datetime | None


@dataclass(frozen=True)
class Transition:
    at: datetime
    actor: str
    action: TransitionAction
    from_: str | None
    to: str
    reason: str | None


# --- reports ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportFile:
    content_type: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class Report:
    id: str
    type: ReportType
    format: ReportFormat
    status: ReportStatus
    parameters: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    expires_at: datetime | None
    error: str | None
    file: ReportFile | None
    download_url: str | None

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


# --- webhooks and events ------------------------------------------------------------------


@dataclass(frozen=True)
class Webhook:
    id: str
    url: str
    description: str | None
    events: list[str]
    status: WebhookStatus
    disabled_reason: str | None
    environment: Environment
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # Only in the answer that creates the endpoint or rotates its secret (shown once); None
    # everywhere else, including a replayed creation.
    secret: str | None = None


@dataclass(frozen=True)
class Delivery:
    id: str
    event_id: str
    event_type: str
    attempt: int
    attempted_at: datetime
    status_code: int | None
    latency_ms: int | None
    success: bool
    error: str | None
    next_attempt_at: datetime | None


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    created_at: datetime
    environment: Environment
    data: dict[str, Any]


# --- alerts and ingest tokens ---------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    id: str
    system_id: str
    type: AlertType
    status: AlertStatus
    opened_at: datetime
    resolved_at: datetime | None
    environment: Environment
    # The numbers that decided it (per type); once resolved, `resolution` holds those that
    # resolved it.
    evidence: dict[str, Any]


@dataclass(frozen=True)
class IngestToken:
    """A data logger's token for one system (`display`: its first 7 and last 4 characters)."""

    id: str
    name: str
    display: str
    created_at: datetime
    last_used_at: datetime | None
    # The full `ik_…` token: only in the answer that creates it (shown once); None in lists.
    token: str | None = None


@dataclass(frozen=True)
class Pagination:
    page: int
    limit: int
    total: int
    total_pages: int
    has_more: bool
