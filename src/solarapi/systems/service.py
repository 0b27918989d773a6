"""Rules of systems: tenancy, defaults, validation that needs context, and events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.alerts import service as alerts
from solarapi.auth.principal import Caller
from solarapi.declarations import service as declarations
from solarapi.errors import Conflict, ValidationFailed
from solarapi.events.service import record_event
from solarapi.jobs.kinds import enqueue_alert_evaluation
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.plans import Environment
from solarapi.kit.text import excerpt
from solarapi.kit.zones import ZONES
from solarapi.models.systems import SYSTEM_STATUSES, DataSource, System, SystemStatus
from solarapi.models.webhooks import EventType
from solarapi.readings.upload import rebuild_daily_rollup
from solarapi.systems import access, repository
from solarapi.systems.schemas import MonitoringIn, SystemCreate, SystemPatch
from solarapi.systems.views import SystemView

DEFAULT_TILT_DEG = 30.0
DEFAULT_OFFLINE_AFTER_HOURS = 4
DEFAULT_UNDERPERFORMANCE_THRESHOLD = 0.8


# A system's `model` fields and the columns that hold them.
MODEL_COLUMNS = {
    "gamma_pdc_pct_per_c": "model_gamma_pdc_pct_per_c",
    "losses_pct": "model_losses_pct",
    "inverter_efficiency": "model_inverter_efficiency",
}


def default_azimuth(latitude: float) -> float:
    """Facing the equator: south (180°) in the northern hemisphere, north (0°) south of it."""
    return 180.0 if latitude >= 0 else 0.0


async def list_systems(
    session: AsyncSession,
    principal: Caller,
    *,
    status: str | None,
    market_zone: str | None,
    page: PageParams,
) -> tuple[list[dict[str, object]], int]:
    """A page of the caller's systems (the contract's objects) and their total."""
    if status is not None and status not in SYSTEM_STATUSES:
        raise ValidationFailed(
            f"status must be one of {', '.join(SYSTEM_STATUSES)}; got '{excerpt(status)}'"
        )
    wanted = None if status is None else SystemStatus(status)
    if market_zone is not None and market_zone not in ZONES:
        raise ValidationFailed(
            f"market_zone: unknown zone '{excerpt(market_zone)}'; see GET /api/v1/market-prices/zones"
        )
    return await repository.page_of_items(
        session,
        account_id=principal.account_id,
        environment=principal.environment,
        status=wanted,
        market_zone=market_zone,
        offset=page.offset,
        limit=page.limit,
    )


async def get_system(session: AsyncSession, principal: Caller, system_id: str) -> SystemView:
    return SystemView.of(await access.read_system(session, principal, system_id))


async def create_system(
    session: AsyncSession, principal: Caller, body: SystemCreate, now: datetime
) -> SystemView:
    live = principal.environment is Environment.LIVE
    if body.data_source is not None:
        data_source = DataSource(body.data_source)
    else:
        data_source = DataSource.METERED if live else DataSource.SIMULATED
    if live and data_source is not DataSource.METERED:
        raise ValidationFailed(
            "data_source: live systems are always 'metered'; simulated systems exist only in "
            "the sandbox (pk_test_ keys)"
        )
    orientation = body.orientation
    tilt = orientation.tilt_deg if orientation and orientation.tilt_deg is not None else None
    azimuth = (
        orientation.azimuth_deg if orientation and orientation.azimuth_deg is not None else None
    )
    spec = SystemSpec(
        name=body.name,
        latitude=body.location.latitude,
        longitude=body.location.longitude,
        timezone=body.location.timezone,
        country=body.location.country,
        capacity_kwp=body.capacity_kwp,
        inverter_capacity_kw=body.inverter_capacity_kw,
        tilt_deg=DEFAULT_TILT_DEG if tilt is None else tilt,
        azimuth_deg=default_azimuth(body.location.latitude) if azimuth is None else azimuth,
        market_zone=body.market_zone,
        installed_on=body.installed_on,
    )
    system = new_system(
        spec,
        account_id=principal.account_id,
        environment=principal.environment,
        data_source=data_source,
        status=SystemStatus(body.status),
        created_at=now,
    )
    system.tilt_defaulted = tilt is None
    system.azimuth_defaulted = azimuth is None
    if body.model is not None:
        for field, column in MODEL_COLUMNS.items():
            setattr(system, column, getattr(body.model, field))
    if body.monitoring is not None:
        for field, value in _monitoring_changes(body.monitoring).items():
            setattr(system, field, value)
    return await add_system(session, system)


@dataclass(frozen=True, slots=True)
class SystemSpec:
    """What a new system is made of: from a create request, or in code (demo data, sandbox
    provisioning)."""

    name: str
    latitude: float
    longitude: float
    timezone: str
    country: str | None
    capacity_kwp: float
    inverter_capacity_kw: float | None
    tilt_deg: float
    azimuth_deg: float
    market_zone: str | None
    installed_on: date | None = None


def new_system(
    spec: SystemSpec,
    *,
    account_id: str,
    environment: Environment,
    data_source: DataSource,
    created_at: datetime,
    status: SystemStatus = SystemStatus.ACTIVE,
) -> System:
    """A system from `spec`, not yet stored (see `add_system`)."""
    return System(
        id=new_id("sys"),
        account_id=account_id,
        environment=environment,
        name=spec.name,
        status=status,
        data_source=data_source,
        capacity_kwp=spec.capacity_kwp,
        inverter_capacity_kw=spec.inverter_capacity_kw,
        latitude=spec.latitude,
        longitude=spec.longitude,
        timezone=spec.timezone,
        country=spec.country,
        tilt_deg=spec.tilt_deg,
        azimuth_deg=spec.azimuth_deg,
        market_zone=spec.market_zone,
        installed_on=spec.installed_on,
        first_reading_at=None,
        last_reading_at=None,
        created_at=created_at,
        updated_at=created_at,
        monitoring_enabled=True,
        monitoring_offline_after_hours=DEFAULT_OFFLINE_AFTER_HOURS,
        monitoring_underperformance_threshold=DEFAULT_UNDERPERFORMANCE_THRESHOLD,
    )


async def add_system(session: AsyncSession, system: System) -> SystemView:
    """Store a new system with its `system.created` event (same transaction)."""
    await repository.add(session, system)
    view = SystemView.of(system)
    await record_event(
        session,
        account_id=system.account_id,
        environment=system.environment,
        event_type=EventType.SYSTEM_CREATED,
        data=view.render(),
    )
    return view


def _not_null(value: object, field: str) -> None:
    if value is None:
        raise ValidationFailed(f"{field}: cannot be null; leave it out to keep the current value")


def _patch_changes(body: SystemPatch) -> dict[str, object]:
    """The model attributes a PATCH body sets, checked before the system is looked up
    (400 comes before 404). `null` clears an optional field and is refused for the rest."""
    given = body.model_fields_set
    if "data_source" in given:
        raise ValidationFailed(
            "data_source: cannot be changed after creation; create a new system with the "
            "other data source instead"
        )
    changes: dict[str, object] = {}
    optional = ("inverter_capacity_kw", "market_zone", "installed_on")
    for field in ("name", "capacity_kwp", "status", *optional):
        if field in given:
            value = getattr(body, field)
            if field not in optional:
                _not_null(value, field)
            changes[field] = SystemStatus(value) if field == "status" else value
    if "monitoring" in given:
        _not_null(body.monitoring, "monitoring")
        assert body.monitoring is not None
        changes.update(_monitoring_changes(body.monitoring))
    for group in ("location", "orientation"):
        if group not in given:
            continue
        part = getattr(body, group)
        _not_null(part, group)
        for field in sorted(part.model_fields_set):
            value = getattr(part, field)
            if field != "country":
                _not_null(value, f"{group}.{field}")
            changes[field] = value
            if group == "orientation":
                changes[f"{field.removesuffix('_deg')}_defaulted"] = False
    if "model" in given:
        # `null` resets every override; a field given as `null` resets that one.
        model = body.model
        for field, column in MODEL_COLUMNS.items():
            if model is None or field in model.model_fields_set:
                changes[column] = None if model is None else getattr(model, field)
    return changes


_MONITORING_COLUMNS = {
    "enabled": "monitoring_enabled",
    "offline_after_hours": "monitoring_offline_after_hours",
    "underperformance_threshold": "monitoring_underperformance_threshold",
}


def _monitoring_changes(body: MonitoringIn) -> dict[str, object]:
    changes: dict[str, object] = {}
    for field in sorted(body.model_fields_set):
        value = getattr(body, field)
        _not_null(value, f"monitoring.{field}")
        changes[_MONITORING_COLUMNS[field]] = value
    return changes


async def update_system(
    session: AsyncSession, principal: Caller, system_id: str, body: SystemPatch, now: datetime
) -> SystemView:
    changes = _patch_changes(body)
    # Under the system's lock from the start, like uploads and declarations: the time zone
    # replaced here is the one the daily rollup is rebuilt from, and no upload can roll a
    # day up with the old zone in between.
    # (Ownership is checked before the lock: another tenant's row is never locked.)
    await access.get_system(session, principal, system_id)
    system = access.owned(await repository.lock_fresh(session, system_id), principal, system_id)
    if any(field.startswith("monitoring_") or field == "status" for field in changes):
        # New thresholds (or a system switched off) are judged at once, not at the next upload.
        await enqueue_alert_evaluation(session, system.id)
    old_timezone = system.timezone
    for field, value in changes.items():
        setattr(system, field, value)
    system.updated_at = now
    await session.flush()
    if system.timezone != old_timezone:
        # The daily rollup follows the local calendar; a new zone moves every day's edges.
        await rebuild_daily_rollup(session, system)
    view = SystemView.of(system)
    await record_event(
        session,
        account_id=system.account_id,
        environment=system.environment,
        event_type=EventType.SYSTEM_UPDATED,
        data=view.render(),
    )
    return view


async def delete_system(
    session: AsyncSession, principal: Caller, system_id: str, now: datetime
) -> None:
    system = await access.get_system(session, principal, system_id)
    if await declarations.blocks_system_deletion(session, system.id):
        raise Conflict(
            f"System '{excerpt(system_id)}' has a submitted or approved declaration and cannot be "
            "deleted; set its status to 'decommissioned' instead"
        )
    # Its open alerts resolve first (alert.resolved), as when it stops being watched.
    await alerts.stand_down_for_deletion(session, system.id, now)
    data = SystemView.of(system).render()
    await repository.delete_system(session, system)
    await record_event(
        session,
        account_id=principal.account_id,
        environment=principal.environment,
        event_type=EventType.SYSTEM_DELETED,
        data=data,
    )
