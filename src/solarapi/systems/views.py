"""A system as the API lists it: a frozen value read in the list's one statement, with its
timestamps already in the API's text (formatted by the database, `db.api_time`), rendered
once (`render`) into exactly the object `service.system_to_api` writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from solarapi.models.systems import DEFAULT_MODEL
from solarapi.systems.span import simulated_span


@dataclass(frozen=True, slots=True)
class SystemView:
    id: str
    name: str
    status: str
    environment: str
    data_source: str
    capacity_kwp: float
    inverter_capacity_kw: float | None
    latitude: float
    longitude: float
    timezone: str
    country: str | None
    tilt_deg: float
    azimuth_deg: float
    market_zone: str | None
    installed_on: date | None
    model_gamma_pdc_pct_per_c: float | None
    model_losses_pct: float | None
    model_inverter_efficiency: float | None
    first_reading_at: str | None
    last_reading_at: str | None
    created_at: str
    updated_at: str
    monitoring_enabled: bool
    monitoring_offline_after_hours: int
    monitoring_underperformance_threshold: float

    def render(self, now: datetime | None = None) -> dict[str, Any]:
        """The contract's system object (`now`: for a simulated system's last reading)."""
        first, last = self.first_reading_at, self.last_reading_at
        if self.data_source == "simulated":
            first, last = simulated_span(self.installed_on, self.timezone, now)
        gamma, losses = self.model_gamma_pdc_pct_per_c, self.model_losses_pct
        efficiency = self.model_inverter_efficiency
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "environment": self.environment,
            "data_source": self.data_source,
            "capacity_kwp": self.capacity_kwp,
            "inverter_capacity_kw": self.inverter_capacity_kw,
            "location": {
                "latitude": self.latitude,
                "longitude": self.longitude,
                "timezone": self.timezone,
                "country": self.country,
            },
            "orientation": {"tilt_deg": self.tilt_deg, "azimuth_deg": self.azimuth_deg},
            "market_zone": self.market_zone,
            "installed_on": self.installed_on.isoformat() if self.installed_on else None,
            "model": {
                "gamma_pdc_pct_per_c": (
                    DEFAULT_MODEL.gamma_pdc_pct_per_c if gamma is None else gamma
                ),
                "losses_pct": DEFAULT_MODEL.losses_pct if losses is None else losses,
                "inverter_efficiency": (
                    DEFAULT_MODEL.inverter_efficiency if efficiency is None else efficiency
                ),
            },
            "first_reading_at": first,
            "last_reading_at": last,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "monitoring": {
                "enabled": self.monitoring_enabled,
                "offline_after_hours": self.monitoring_offline_after_hours,
                "underperformance_threshold": self.monitoring_underperformance_threshold,
            },
        }
