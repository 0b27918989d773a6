"""A system as the API shows it: a frozen value with its timestamps already in the API's
text, rendered once (`render`, documented by `schemas.SystemOut`). The list reads its views
in one statement (the database formats the timestamps, `db.api_time`); a single system's
answer, its events' `data` and the CLI build theirs from the system (`SystemView.of`).

A `NamedTuple`, not a frozen dataclass: as immutable, and a page of 50 is made from its rows
by `tuple.__new__` in C. A frozen dataclass's `__init__` sets its 25 fields one
`object.__setattr__` at a time — 2.8 µs a view against 0.2 µs, ~12 % of the CPU of an
uncached `GET /systems` page (py-spy, bench/fleet W4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any, NamedTuple

from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.systems import DEFAULT_MODEL, DataSource, ReadableSystem, SystemStatus
from solarapi.systems.span import simulated_span


class SystemView(NamedTuple):
    id: str
    name: str
    status: SystemStatus
    environment: Environment
    data_source: DataSource
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

    @classmethod
    def of(cls, system: ReadableSystem) -> SystemView:
        return cls(
            id=system.id,
            name=system.name,
            status=system.status,
            environment=system.environment,
            data_source=system.data_source,
            capacity_kwp=system.capacity_kwp,
            inverter_capacity_kw=system.inverter_capacity_kw,
            latitude=system.latitude,
            longitude=system.longitude,
            timezone=system.timezone,
            country=system.country,
            tilt_deg=system.tilt_deg,
            azimuth_deg=system.azimuth_deg,
            market_zone=system.market_zone,
            installed_on=system.installed_on,
            model_gamma_pdc_pct_per_c=system.model_gamma_pdc_pct_per_c,
            model_losses_pct=system.model_losses_pct,
            model_inverter_efficiency=system.model_inverter_efficiency,
            first_reading_at=format_optional(system.first_reading_at),
            last_reading_at=format_optional(system.last_reading_at),
            created_at=format_timestamp(system.created_at),
            updated_at=format_timestamp(system.updated_at),
            monitoring_enabled=system.monitoring_enabled,
            monitoring_offline_after_hours=system.monitoring_offline_after_hours,
            monitoring_underperformance_threshold=system.monitoring_underperformance_threshold,
        )

    def render(self, now: datetime | None = None) -> dict[str, object]:
        """The contract's system object (`now`: for a simulated system's last reading)."""
        first, last = self.first_reading_at, self.last_reading_at
        if self.data_source == DataSource.SIMULATED:
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


# The performance model's defaults, as the contract shows a field without an override.
_GAMMA = DEFAULT_MODEL.gamma_pdc_pct_per_c
_LOSSES = DEFAULT_MODEL.losses_pct
_EFFICIENCY = DEFAULT_MODEL.inverter_efficiency
_SIMULATED = DataSource.SIMULATED.value


def _listed(stored_times: bool) -> Callable[[Sequence[Any]], dict[str, object]]:
    """The item of a listed row (`listed_items`). A timestamp as SQLite stores it
    (`2025-06-15 12:00:00.123456`) is cut to the API's form (`2025-06-15T12:00:00Z`) here,
    as `db.api_time`'s reader does, inline: a call per value cost as much as the cut."""

    def item(row: Sequence[Any]) -> dict[str, object]:
        (
            _total, id_, name, status, environment, data_source, capacity, inverter, latitude,
            longitude, timezone, country, tilt, azimuth, zone, installed, gamma, losses,
            efficiency, first, last, created, updated, enabled, offline, threshold,
        ) = row  # fmt: skip
        if installed is not None and installed.__class__ is not str:
            installed = installed.isoformat()
        if data_source == _SIMULATED:
            first, last = simulated_span(
                None if installed is None else date.fromisoformat(installed), timezone
            )
        elif stored_times:
            if first is not None:
                first = f"{first[:10]}T{first[11:19]}Z"
            if last is not None:
                last = f"{last[:10]}T{last[11:19]}Z"
        if stored_times:
            created = f"{created[:10]}T{created[11:19]}Z"
            updated = f"{updated[:10]}T{updated[11:19]}Z"
        return {
            "id": id_,
            "name": name,
            "status": status,
            "environment": environment,
            "data_source": data_source,
            "capacity_kwp": capacity,
            "inverter_capacity_kw": inverter,
            "location": {
                "latitude": latitude,
                "longitude": longitude,
                "timezone": timezone,
                "country": country,
            },
            "orientation": {"tilt_deg": tilt, "azimuth_deg": azimuth},
            "market_zone": zone,
            "installed_on": installed,
            "model": {
                "gamma_pdc_pct_per_c": _GAMMA if gamma is None else gamma,
                "losses_pct": _LOSSES if losses is None else losses,
                "inverter_efficiency": _EFFICIENCY if efficiency is None else efficiency,
            },
            "first_reading_at": first,
            "last_reading_at": last,
            "created_at": created,
            "updated_at": updated,
            "monitoring": {
                "enabled": bool(enabled),
                "offline_after_hours": offline,
                "underperformance_threshold": threshold,
            },
        }

    return item


def listed_items(rows: Sequence[Sequence[Any]], *, stored_times: bool) -> list[dict[str, object]]:
    """The contract's system objects of a listed page, each straight from its row as the
    driver gives it: the page's total, then `SystemView`'s columns with the timestamps as
    `db.api_time` reads them (`stored_times`: SQLite's, as stored, cut here; PostgreSQL's
    come formatted), no column converted. The same objects as `SystemView.render` of the
    same systems (the enums' values, `installed_on` as ISO text, the model's defaults, a
    simulated system's span of readings), made without a view, an enum member or a date
    per row: the per-row conversions and views were ~40 % of the endpoint's CPU."""
    return list(map(_STORED_ITEM if stored_times else _FORMATTED_ITEM, rows))


_STORED_ITEM = _listed(stored_times=True)
_FORMATTED_ITEM = _listed(stored_times=False)
