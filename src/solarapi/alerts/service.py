"""Rules of alerts: the read endpoints' checks, and evaluating a system's rules into alerts
that open and resolve (with their events, in the same transaction).

Concurrency: an evaluation reads without locks and decides; only when an alert must open or
resolve does it take the system's lock (the one lock every change under a system takes),
read the open alerts again and write. Two evaluations of one system therefore open one
alert, and the partial unique index (one open alert per system and type) holds even if a
future caller forgets the lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.alerts import detectors, repository
from solarapi.alerts.detectors import Finding, Observations, Verdict
from solarapi.alerts.rendering import AlertRecord, render
from solarapi.alerts.sky import PROCESS_SKY, QUARTER_S, FloatArray, IntArray, Site, sun_at
from solarapi.auth.principal import Principal
from solarapi.errors import NotFound, ValidationFailed
from solarapi.events.service import record_event
from solarapi.kit import cpu
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.plans import Environment
from solarapi.kit.text import excerpt
from solarapi.models.alerts import ALERT_STATUSES, ALERT_TYPES, AlertStatus, AlertType
from solarapi.models.webhooks import EventType
from solarapi.performance import repository as performance_repository
from solarapi.performance import service as performance_service
from solarapi.performance.values import Source
from solarapi.readings import repository as readings_repository
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import read_system

# The sweep reads systems in batches of this many, one transaction each.
SWEEP_BATCH = 500
# The offline rule looks back at most this far for daylight (a longer gap is offline anyway).
OFFLINE_LOOKBACK_DAYS = 10


# --- reads -------------------------------------------------------------------------------------


def _check_filter(name: str, value: str | None, allowed: Sequence[str]) -> str | None:
    if value is None or value == "":
        return None
    if value not in allowed:
        raise ValidationFailed(
            f"{name} must be one of {', '.join(allowed)}; got '{excerpt(value)}'"
        )
    return value


async def list_alerts(
    session: AsyncSession,
    principal: Principal,
    *,
    system_id: str | None,
    status: str | None,
    alert_type: str | None,
    page: PageParams,
) -> tuple[list[AlertRecord], int]:
    status = _check_filter("status", status, ALERT_STATUSES)
    alert_type = _check_filter("type", alert_type, ALERT_TYPES)
    if system_id:
        # A system of another account or environment, or none: 404 naming it, as every
        # filter by system answers (not an empty list, which reads as "no alerts").
        await read_system(session, principal, system_id)
    return await repository.list_page(
        session,
        account_id=principal.account_id,
        environment=principal.environment,
        system_id=system_id or None,
        status=status,
        alert_type=alert_type,
        offset=page.offset,
        limit=page.limit,
    )


async def get_alert(session: AsyncSession, principal: Principal, alert_id: str) -> AlertRecord:
    alert = await repository.get(session, alert_id)
    if (
        alert is None
        or alert.account_id != principal.account_id
        or alert.environment != principal.environment.value
    ):
        raise NotFound(f"No alert with id '{excerpt(alert_id)}'")
    return alert


async def open_alerts_of_account(
    session: AsyncSession, account_id: str, environment: str | None
) -> list[AlertRecord]:
    """The dashboard's view: every open alert of the account."""
    return await repository.open_for_systems(session, account_id, environment)


# --- evaluation --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MonitoredSystem:
    id: str
    account_id: str
    environment: Environment
    status: str
    data_source: str
    site: Site
    last_reading_at: datetime | None
    enabled: bool
    settings: detectors.Settings

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> MonitoredSystem:
        (
            system_id,
            account_id,
            environment,
            status,
            data_source,
            latitude,
            longitude,
            tilt,
            azimuth,
            capacity,
            inverter,
            last_reading_at,
            enabled,
            offline_hours,
            threshold,
        ) = row
        return cls(
            id=system_id,
            account_id=account_id,
            environment=environment,
            status=status,
            data_source=data_source,
            site=Site(latitude, longitude, tilt, azimuth, capacity, inverter),
            last_reading_at=last_reading_at,
            enabled=bool(enabled),
            settings=detectors.Settings(float(offline_hours), float(threshold)),
        )

    @property
    def watched(self) -> bool:
        return self.enabled and self.status == "active" and self.data_source == "metered"

    @property
    def last_reading_s(self) -> int | None:
        return None if self.last_reading_at is None else int(self.last_reading_at.timestamp())


@dataclass(frozen=True, slots=True)
class Change:
    """An alert an evaluation opened or resolved."""

    alert: AlertRecord
    opened: bool


async def evaluate_system(session: AsyncSession, system_id: str, now: datetime) -> list[Change]:
    """Evaluate every rule of one system and open or resolve its alerts accordingly."""
    row = await repository.monitored_system(session, system_id)
    if row is None:
        return []
    system = MonitoredSystem.from_row(row)
    current = {alert.type: alert for alert in await repository.open_alerts(session, system.id)}
    if not system.watched:
        reason = "monitoring disabled" if not system.enabled else f"system is {system.status}"
        return await _apply(session, system, _stand_down(current, reason), current, now)
    now_s = int(now.timestamp())
    since_s = now_s - now_s % QUARTER_S - detectors.HISTORY_DAYS * 86400
    # The readings area's driver-level read: arrays straight from the rows, no ORM objects;
    # start and energy only (the rules read no power).
    rows = await readings_repository.energy_between(session, system.id, since_s, now_s)
    expected_wh, source = await _measured_expectation(session, system, rows.starts, now)
    frozen = current.get(AlertType.UNDERPERFORMING)
    # The sun and the clear sky (pvlib, pandas) hold the GIL for 15-220 ms: in an API
    # process, in the CPU process (`cpu.off_loop`), with a sky cache sized as this one.
    findings = await cpu.off_loop(
        detectors.evaluate_with_sky_of,
        PROCESS_SKY.max_days,
        system.site,
        Observations(rows.starts, rows.energy_wh, system.last_reading_s, expected_wh, source),
        now_s,
        system.settings,
        _frozen_baseline(frozen),
    )
    return await _apply(session, system, findings, current, now)


async def _measured_expectation(
    session: AsyncSession, system: MonitoredSystem, starts: IntArray, now: datetime
) -> tuple[FloatArray | None, str | None]:
    """The performance model's expected energy per stored quarter-hour of the underperformance
    window, when the system has measured irradiance (sensor or satellite) for at least
    MIN_COVERAGE of them; else (None, None) and the rule uses the clear-sky envelope."""
    now_s = int(now.timestamp())
    lo = now_s - now_s % 86400 - (detectors.WINDOW_DAYS + 1) * 86400
    in_window = starts >= lo
    if not in_window.any():
        return None, None
    sensor, satellite = await performance_repository.both_between(session, system.id, lo, now_s)
    if len(sensor) + len(satellite) < detectors.MIN_COVERAGE * np.count_nonzero(in_window) / 2:
        return None, None  # cheap exit: far too little irradiance (nights count in `starts`)
    record = await systems_repository.get_record(session, system.id)
    if record is None:
        return None, None
    first, last = int(starts[in_window][0]), int(starts[-1]) + QUARTER_S
    modelled = (await performance_service.quarter_hours(session, record, first, last, now)).modelled
    measured = (modelled.source == Source.SENSOR) | (modelled.source == Source.SATELLITE)
    expected = np.full(starts.size, np.nan)
    position = np.searchsorted(modelled.starts, starts)
    found = (position < modelled.starts.size) & in_window
    found[found] = modelled.starts[position[found]] == starts[found]
    expected[found] = np.where(
        measured[position[found]], modelled.expected_wh[position[found]], np.nan
    )
    daylight = found.copy()
    sun = await cpu.off_loop(sun_at, system.site, starts[found])
    daylight[found] = sun.elevation_deg > detectors.DAYLIGHT_ELEVATION_DEG
    if np.count_nonzero(daylight & ~np.isnan(expected)) < detectors.MIN_COVERAGE * max(
        int(np.count_nonzero(daylight)), 1
    ):
        return None, None
    sources = {Source(int(code)).label for code in np.unique(modelled.source[measured])}
    return expected, sources.pop() if len(sources) == 1 else "mixed"


def _frozen_baseline(alert: AlertRecord | None) -> float | None:
    if alert is None:
        return None
    value = alert.evidence.get("baseline_ratio")
    return float(value) if isinstance(value, int | float) else None


def _stand_down(current: dict[AlertType, AlertRecord], reason: str) -> list[Finding]:
    """A system no longer watched (monitoring off, inactive, decommissioned) or deleted: its
    open alerts resolve, saying why."""
    return [
        Finding(AlertType(alert_type), Verdict.CLEAR, {"reason": reason}) for alert_type in current
    ]


async def stand_down_for_deletion(
    session: AsyncSession, system_id: str, now: datetime
) -> list[Change]:
    """A system about to be deleted: its open alerts resolve (`"reason": "system deleted"`)
    with their `alert.resolved` events, in the deletion's transaction — a subscriber's open
    incident is closed, not left open for ever — and then go with the system."""
    row = await repository.monitored_system(session, system_id)
    if row is None:
        return []
    system = MonitoredSystem.from_row(row)
    current = {alert.type: alert for alert in await repository.open_alerts(session, system.id)}
    return await _apply(session, system, _stand_down(current, "system deleted"), current, now)


async def evaluate_offline(
    session: AsyncSession, system: MonitoredSystem, now: datetime, *, may_have_open: bool = True
) -> list[Change]:
    """The offline rule alone (the 15-minute sweep): the only rule that changes with time
    rather than with stored data. Cheap for a system that reported recently: wall-clock hours
    bound daylight hours, so no sun is computed unless the gap could be long enough."""
    now_s = int(now.timestamp())
    last = system.last_reading_s
    if last is None:
        return []
    gap_hours = (now_s - last - QUARTER_S) / 3600
    if gap_hours < system.settings.offline_after_hours and not may_have_open:
        return []
    current = {alert.type: alert for alert in await repository.open_alerts(session, system.id)}
    if gap_hours < system.settings.offline_after_hours and AlertType.OFFLINE not in current:
        return []
    lookback = max(last + QUARTER_S, now_s - OFFLINE_LOOKBACK_DAYS * 86400)
    end = now_s - now_s % QUARTER_S
    starts = np.arange(lookback - lookback % QUARTER_S, end, QUARTER_S, dtype=np.int64)
    sun = await cpu.off_loop(sun_at, system.site, starts)
    finding = detectors.offline(sun, last, now_s, system.settings)
    return await _apply(session, system, [finding], current, now)


async def _apply(
    session: AsyncSession,
    system: MonitoredSystem,
    findings: Sequence[Finding],
    current: dict[AlertType, AlertRecord],
    now: datetime,
) -> list[Change]:
    wanted = [
        finding
        for finding in findings
        if (finding.verdict is Verdict.HOLDS and finding.type not in current)
        or (finding.verdict is Verdict.CLEAR and finding.type in current)
    ]
    if not wanted:
        return []
    # Something changes: serialise with every other writer of this system, then look again.
    await systems_repository.lock(session, system.id)
    current = {alert.type: alert for alert in await repository.open_alerts(session, system.id)}
    changes: list[Change] = []
    for finding in wanted:
        existing = current.get(finding.type)
        if finding.verdict is Verdict.HOLDS and existing is None:
            alert = await repository.insert_open(
                session,
                alert_id=new_id("alr"),
                account_id=system.account_id,
                environment=system.environment,
                system_id=system.id,
                alert_type=finding.type,
                opened_at=now,
                evidence=dict(finding.evidence),
            )
            changes.append(Change(alert, opened=True))
        elif finding.verdict is Verdict.CLEAR and existing is not None:
            evidence = {**existing.evidence, "resolution": dict(finding.evidence)}
            if await repository.resolve(session, existing.id, now, evidence):
                alert = AlertRecord(
                    existing.id,
                    existing.account_id,
                    existing.environment,
                    existing.system_id,
                    existing.type,
                    AlertStatus.RESOLVED,
                    existing.opened_at,
                    now,
                    evidence,
                )
                changes.append(Change(alert, opened=False))
    for change in changes:
        await record_event(
            session,
            account_id=change.alert.account_id,
            environment=change.alert.environment,
            event_type=EventType.ALERT_OPENED if change.opened else EventType.ALERT_RESOLVED,
            data=render(change.alert),
        )
    return changes


async def sweep(maker: async_sessionmaker[AsyncSession], now: datetime) -> int:
    """The 15-minute pass over every metered system: the offline rule (the one rule that
    changes with time alone; the others change with stored data and run after every upload)
    and the resolution of alerts of systems no longer watched. Returns how many alerts
    changed. One transaction per batch, so a long sweep holds no lock for long."""
    after = ""
    changed = 0
    while True:
        async with maker() as session:
            rows = await repository.monitored_systems_page(session, after, SWEEP_BATCH)
        if not rows:
            return changed
        systems = [MonitoredSystem.from_row(row) for row in rows]
        after = systems[-1].id
        async with maker() as session, session.begin():
            # One query for the batch: most systems reported recently and have nothing open,
            # and then need neither a query nor the sun.
            with_open = await repository.systems_with_open(
                session, [system.id for system in systems]
            )
            for system in systems:
                if system.watched:
                    changed += len(
                        await evaluate_offline(
                            session, system, now, may_have_open=system.id in with_open
                        )
                    )
                elif system.id in with_open:
                    changed += len(await evaluate_system(session, system.id, now))
