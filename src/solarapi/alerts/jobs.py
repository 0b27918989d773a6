"""The alerts area's work on the shared job runner (imported by `jobs.runner.load_handlers`):
the evaluation of one system after an upload, and the 15-minute sweep.

The sweep is one job per 15-minute slot with an id made of the slot, so however many runners
(inline in every API process, `solarapi worker` processes) schedule it, the database keeps one
and one runner runs it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.alerts import service
from solarapi.alerts.sky import PROCESS_SKY
from solarapi.jobs.kinds import ALERTS_EVALUATE, ALERTS_SWEEP
from solarapi.jobs.queue import (
    PermanentJobError,
    enqueue,
    job_handler,
    periodic_task,
    settings_of,
)
from solarapi.kit.timefmt import utcnow

SWEEP_EVERY_S = 900
# Runners look this often whether the current slot's sweep is scheduled (a few cheap
# look-ups a minute; the slot's job id makes every look after the first a no-op).
SCHEDULE_EVERY_S = 60


@job_handler(ALERTS_EVALUATE)
async def evaluate(maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    system_id = payload.get("system_id")
    if not isinstance(system_id, str):
        raise PermanentJobError("payload has no system_id")
    _size_sky(maker)
    async with maker() as session, session.begin():
        await service.evaluate_system(session, system_id, utcnow())


@job_handler(ALERTS_SWEEP)
async def sweep(maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    _size_sky(maker)
    await service.sweep(maker, utcnow())


def _size_sky(maker: async_sessionmaker[AsyncSession]) -> None:
    """The process's sky cache at the size the app's or worker's settings give (the same
    settings every time in one process: a no-op after the first job)."""
    days = settings_of(maker).alert_sky_cache_days
    if PROCESS_SKY.max_days != days:
        PROCESS_SKY.resize(days)


def sweep_job_id(now: datetime) -> str:
    slot = int(now.timestamp()) // SWEEP_EVERY_S * SWEEP_EVERY_S
    return f"job_alerts_sweep_{slot}"


async def schedule_sweep(maker: async_sessionmaker[AsyncSession], now: datetime) -> bool:
    """Queue the current slot's sweep unless a runner already did; True when this one did."""
    try:
        async with maker() as session, session.begin():
            await enqueue(session, ALERTS_SWEEP, {}, max_attempts=2, job_id=sweep_job_id(now))
    except IntegrityError:
        return False
    return True


@periodic_task("alerts.schedule_sweep", every_seconds=SCHEDULE_EVERY_S)
async def _schedule_sweep(maker: async_sessionmaker[AsyncSession], now: datetime) -> None:
    await schedule_sweep(maker, now)
