"""SQL of alerts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.alerts.rendering import AlertRecord
from solarapi.db import DriverQuery
from solarapi.kit.plans import Environment
from solarapi.models.alerts import Alert, AlertStatus, AlertType
from solarapi.models.systems import System

_COLUMNS = (
    Alert.id,
    Alert.account_id,
    Alert.environment,
    Alert.system_id,
    Alert.type,
    Alert.status,
    Alert.opened_at,
    Alert.resolved_at,
    Alert.evidence,
)


def _record(row: Sequence[Any]) -> AlertRecord:
    return AlertRecord(*row)


async def list_page(
    session: AsyncSession,
    *,
    account_id: str,
    environment: str,
    system_id: str | None,
    status: str | None,
    alert_type: str | None,
    offset: int,
    limit: int,
) -> tuple[list[AlertRecord], int]:
    conditions = [Alert.account_id == account_id, Alert.environment == environment]
    if system_id is not None:
        conditions.append(Alert.system_id == system_id)
    if status is not None:
        conditions.append(Alert.status == status)
    if alert_type is not None:
        conditions.append(Alert.type == alert_type)
    total = await session.scalar(select(func.count()).select_from(Alert).where(*conditions))
    rows = await session.execute(
        select(*_COLUMNS)
        .where(*conditions)
        .order_by(Alert.opened_at.desc(), Alert.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return [_record(row) for row in rows], int(total or 0)


async def get(session: AsyncSession, alert_id: str) -> AlertRecord | None:
    row = (await session.execute(select(*_COLUMNS).where(Alert.id == alert_id))).first()
    return None if row is None else _record(row)


# The evaluation's two reads before it decides (one of each per upload), straight through the
# driver: the ORM's statement machinery cost more than the reads.
_OPEN_OF_SYSTEM = DriverQuery(
    select(*_COLUMNS).where(
        Alert.system_id == bindparam("system_id"), Alert.status == bindparam("status")
    )
)


async def open_alerts(session: AsyncSession, system_id: str) -> list[AlertRecord]:
    rows = await _OPEN_OF_SYSTEM.all(
        session, {"system_id": system_id, "status": AlertStatus.OPEN.value}
    )
    return [_record(row) for row in rows]


async def insert_open(
    session: AsyncSession,
    *,
    alert_id: str,
    account_id: str,
    environment: Environment,
    system_id: str,
    alert_type: AlertType,
    opened_at: datetime,
    evidence: dict[str, Any],
) -> AlertRecord:
    alert = Alert(
        id=alert_id,
        account_id=account_id,
        environment=environment,
        system_id=system_id,
        type=alert_type,
        status=AlertStatus.OPEN,
        opened_at=opened_at,
        resolved_at=None,
        evidence=evidence,
    )
    session.add(alert)
    await session.flush()
    return AlertRecord(
        alert_id,
        account_id,
        environment,
        system_id,
        alert_type,
        AlertStatus.OPEN,
        opened_at,
        None,
        evidence,
    )


async def resolve(
    session: AsyncSession, alert_id: str, resolved_at: datetime, evidence: dict[str, Any]
) -> bool:
    """Resolve an open alert; False when it was no longer open (another evaluation won)."""
    result = await session.execute(
        update(Alert)
        .where(Alert.id == alert_id, Alert.status == AlertStatus.OPEN)
        .values(status=AlertStatus.RESOLVED, resolved_at=resolved_at, evidence=evidence)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def open_for_systems(
    session: AsyncSession, account_id: str, environment: str | None
) -> list[AlertRecord]:
    """Every open alert of an account (one environment, or both), newest first."""
    conditions = [Alert.account_id == account_id, Alert.status == AlertStatus.OPEN]
    if environment is not None:
        conditions.append(Alert.environment == environment)
    rows = await session.execute(
        select(*_COLUMNS).where(*conditions).order_by(Alert.opened_at.desc(), Alert.id.desc())
    )
    return [_record(row) for row in rows]


# The columns the rules need of a system.
MONITORED_COLUMNS = (
    System.id,
    System.account_id,
    System.environment,
    System.status,
    System.data_source,
    System.latitude,
    System.longitude,
    System.tilt_deg,
    System.azimuth_deg,
    System.capacity_kwp,
    System.inverter_capacity_kw,
    System.last_reading_at,
    System.monitoring_enabled,
    System.monitoring_offline_after_hours,
    System.monitoring_underperformance_threshold,
)


_MONITORED = DriverQuery(select(*MONITORED_COLUMNS).where(System.id == bindparam("id")))


async def monitored_system(session: AsyncSession, system_id: str) -> Sequence[Any] | None:
    return await _MONITORED.first(session, {"id": system_id})


async def monitored_systems_page(
    session: AsyncSession, after_id: str, limit: int
) -> list[Sequence[Any]]:
    """Metered systems in id order after `after_id`: the 15-minute sweep's batches."""
    rows = await session.execute(
        select(*MONITORED_COLUMNS)
        .where(System.id > after_id, System.data_source == "metered")
        .order_by(System.id)
        .limit(limit)
    )
    return [tuple(row) for row in rows]


async def systems_with_open(session: AsyncSession, system_ids: Sequence[str]) -> set[str]:
    rows = await session.scalars(
        select(Alert.system_id)
        .where(Alert.system_id.in_(list(system_ids)), Alert.status == AlertStatus.OPEN)
        .distinct()
    )
    return set(rows)
