"""Demo data of the readings area: two live metered systems per demo account with a year of
15-minute readings up to now, with a few deliberate gaps (idempotent; a re-run adds the
quarter-hours that ended since the last reading).

A demo system is `installed_on` the local day a year before the first demo run, and its
readings start at that day's local midnight: demo data must not contradict itself (a system
installed years before its first reading teaches users that such gaps are normal).

Readings come from the sandbox's physical model (`solarapi.sandbox.model`), as a simulated
system's would.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import QUARTER_S, FloatArray, IntArray, local_date, local_midnight
from solarapi.kit.plans import Environment, Plan
from solarapi.models.systems import DataSource, System
from solarapi.readings.service import simulate
from solarapi.readings.upload import store_series
from solarapi.systems.service import SystemSpec, new_system

DEMO_DAYS = 365
BATCH = 10_000


DEMO_SYSTEMS = (
    SystemSpec(
        name="Rooftop Haarlem",
        capacity_kwp=8.4,
        inverter_capacity_kw=7.0,
        latitude=52.38,
        longitude=4.64,
        timezone="Europe/Amsterdam",
        country="NL",
        market_zone="NL",
        tilt_deg=35.0,
        azimuth_deg=180.0,
    ),
    SystemSpec(
        name="Barn Freiburg",
        capacity_kwp=30.0,
        inverter_capacity_kw=27.0,
        latitude=47.99,
        longitude=7.84,
        timezone="Europe/Berlin",
        country="DE",
        market_zone="DE-LU",
        tilt_deg=20.0,
        azimuth_deg=200.0,
    ),
)

# Deliberate gaps, as (days before now, hours long): a dead logger, a firmware update, a
# lost night of data. They show up as `null` buckets, never as zeros.
GAPS = ((200, 30.0), (90, 6.0), (12, 2.5))


async def add_demo_data(session: AsyncSession, account_id: str, plan: Plan, now: datetime) -> None:
    existing = {
        system.name: system
        for system in (
            await session.scalars(
                select(System).where(System.account_id == account_id, System.environment == "live")
            )
        ).all()
    }
    for spec in DEMO_SYSTEMS:
        if spec.name in existing:
            # Idempotent: a re-run keeps the system and its readings as they are, and adds the
            # quarter-hours that ended since its last reading (the demo a day later has no
            # day's gap, and no offline alert for it).
            system = existing[spec.name]
            if (system.latitude, system.longitude, system.capacity_kwp) == (
                spec.latitude,
                spec.longitude,
                spec.capacity_kwp,
            ):  # the demo's own system, not one a user made under its name
                await _top_up(session, system, now)
            continue
        tz = ZoneInfo(spec.timezone)
        installed_on = local_date(int(now.timestamp()), tz) - timedelta(days=DEMO_DAYS)
        system = new_system(
            replace(spec, installed_on=installed_on),
            account_id=account_id,
            environment=Environment.LIVE,
            data_source=DataSource.METERED,
            created_at=now,
        )
        session.add(system)
        await session.flush()
        await _store(session, system, *await demo_series(system, now))


async def _top_up(session: AsyncSession, system: System, now: datetime) -> None:
    """The model's quarter-hours after the system's last reading, up to the last one that
    has ended (none for a system that is not metered or has no reading)."""
    if system.data_source != DataSource.METERED or system.last_reading_at is None:
        return
    now_s = int(now.timestamp())
    start_s = int(system.last_reading_at.timestamp()) + QUARTER_S
    end_s = now_s - now_s % QUARTER_S
    if start_s >= end_s:
        return
    await _store(session, system, *await _modelled(system, start_s, end_s))


async def _store(
    session: AsyncSession, system: System, starts: IntArray, energy: FloatArray
) -> None:
    """Store quarter-hours in batches, each with its average power (energy × 4)."""
    for lo in range(0, len(starts), BATCH):
        batch = energy[lo : lo + BATCH]
        await store_series(session, system, starts[lo : lo + BATCH], batch, batch * 4.0)


async def _modelled(system: System, start_s: int, end_s: int) -> tuple[IntArray, FloatArray]:
    """The sandbox model's quarter-hours of [start_s, end_s), energy rounded as uploaded."""
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    series = await simulate(system, start_s, end_s)
    assert series is not None
    assert len(series.starts) == len(starts)
    energy: FloatArray = np.asarray(series.energy_wh, dtype=np.float64).round(3)
    return starts, energy


async def demo_series(system: System, now: datetime) -> tuple[IntArray, FloatArray]:
    """The quarter-hours from the local midnight of `installed_on` (else a year back) up to the
    last one that has ended, minus the gaps."""
    now_s = int(now.timestamp())
    end_s = now_s - now_s % QUARTER_S
    start_s = end_s - DEMO_DAYS * 86400
    if system.installed_on is not None:
        start_s = local_midnight(system.installed_on, ZoneInfo(system.timezone))
    # The model starts where the system's history does: at the local midnight of
    # `installed_on`, set a year back for every demo system.
    starts, energy = await _modelled(system, start_s, end_s)
    keep = np.ones(len(starts), dtype=bool)
    for days_ago, hours in GAPS:
        gap_start = end_s - days_ago * 86400
        keep &= ~((starts >= gap_start) & (starts < gap_start + int(hours * 3600)))
    return starts[keep], energy[keep]
