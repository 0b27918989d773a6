"""Demo data of the systems area: two live metered systems per demo account with a year of
15-minute readings up to now, with a few deliberate gaps (idempotent).

Readings come from the sandbox's physical model when `solarapi.sandbox.model` is installed;
otherwise from a clear-sky stand-in (`_stand_in_energy`): the sine of the sun's elevation
from the textbook declination and hour-angle formulas, scaled to the capacity and dimmed by a
deterministic day-to-day cloudiness. It is shaped like solar production (nights zero, summer
above winter) but is not a physical model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import QUARTER_S, FloatArray, IntArray
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Plan
from solarapi.models.systems import System

DEMO_DAYS = 365
BATCH = 10_000


@dataclass(frozen=True, slots=True)
class DemoSystem:
    name: str
    capacity_kwp: float
    inverter_capacity_kw: float | None
    latitude: float
    longitude: float
    timezone: str
    country: str
    market_zone: str
    tilt_deg: float
    azimuth_deg: float
    installed_on: date


DEMO_SYSTEMS = (
    DemoSystem(
        "Rooftop Haarlem",
        8.4,
        7.0,
        52.38,
        4.64,
        "Europe/Amsterdam",
        "NL",
        "NL",
        35.0,
        180.0,
        date(2023, 4, 1),
    ),
    DemoSystem(
        "Barn Freiburg",
        30.0,
        27.0,
        47.99,
        7.84,
        "Europe/Berlin",
        "DE",
        "DE-LU",
        20.0,
        200.0,
        date(2022, 9, 15),
    ),
)

# Deliberate gaps, as (days before now, hours long): a dead logger, a firmware update, a
# lost night of data. They show up as `null` buckets, never as zeros.
GAPS = ((200, 30.0), (90, 6.0), (12, 2.5))


async def add_demo_data(session: AsyncSession, account_id: str, plan: Plan, now: datetime) -> None:
    from solarapi.readings.upload import store_series

    existing = set(
        (
            await session.scalars(
                select(System.name).where(
                    System.account_id == account_id, System.environment == "live"
                )
            )
        ).all()
    )
    for spec in DEMO_SYSTEMS:
        if spec.name in existing:
            continue  # idempotent: a re-run keeps the system and its readings as they are
        system = _system(spec, account_id, now)
        session.add(system)
        await session.flush()
        starts, energy, power = await demo_series(system, now)
        for lo in range(0, len(starts), BATCH):
            await store_series(
                session,
                system,
                starts[lo : lo + BATCH],
                energy[lo : lo + BATCH],
                power[lo : lo + BATCH],
            )


def _system(spec: DemoSystem, account_id: str, now: datetime) -> System:
    return System(
        id=new_id("sys"),
        account_id=account_id,
        environment="live",
        name=spec.name,
        status="active",
        data_source="metered",
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
        created_at=now,
        updated_at=now,
    )


async def demo_series(system: System, now: datetime) -> tuple[IntArray, FloatArray, FloatArray]:
    """A year of quarter-hours up to the last one that has ended, minus the gaps."""
    now_s = int(now.timestamp())
    end_s = now_s - now_s % QUARTER_S
    start_s = end_s - DEMO_DAYS * 86400
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    energy = await _model_energy(system, start_s, end_s)
    if energy is None:
        energy = _stand_in_energy(system, starts)
    keep = np.ones(len(starts), dtype=bool)
    for days_ago, hours in GAPS:
        gap_start = end_s - days_ago * 86400
        keep &= ~((starts >= gap_start) & (starts < gap_start + int(hours * 3600)))
    energy = np.round(energy, 3)
    return starts[keep], energy[keep], (energy * 4.0)[keep]


async def _model_energy(system: System, start_s: int, end_s: int) -> FloatArray | None:
    from solarapi.readings.service import simulate

    series = await simulate(system, start_s, end_s)
    return None if series is None else np.asarray(series.energy_wh, dtype=np.float64)


def _stand_in_energy(system: System, starts: IntArray) -> FloatArray:
    middle = starts + QUARTER_S // 2
    day_of_year = (middle // 86400 + 4) % 365.25  # days since 1 Jan, near enough
    declination = np.radians(23.44) * np.sin(2 * np.pi * (day_of_year - 81) / 365.0)
    solar_hours = (middle % 86400) / 3600.0 + system.longitude / 15.0
    hour_angle = np.radians(15.0 * (solar_hours - 12.0))
    latitude = np.radians(system.latitude)
    sin_elevation = np.sin(latitude) * np.sin(declination) + np.cos(latitude) * np.cos(
        declination
    ) * np.cos(hour_angle)
    seed = int.from_bytes(hashlib.sha256(system.name.encode()).digest()[:4], "big")
    days = middle // 86400
    unique_days, index = np.unique(days, return_inverse=True)
    cloudiness = np.random.default_rng(seed).uniform(0.25, 1.0, len(unique_days))[index]
    power_w = system.capacity_kwp * 1000 * 0.8 * np.clip(sin_elevation, 0, None) ** 1.2
    if system.inverter_capacity_kw is not None:
        power_w = np.minimum(power_w * cloudiness, system.inverter_capacity_kw * 1000)
    else:
        power_w = power_w * cloudiness
    result: FloatArray = power_w * (QUARTER_S / 3600)
    return result
