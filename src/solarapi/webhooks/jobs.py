"""The webhooks area's jobs on the shared runner: deliveries, and the clean-up of events and
Idempotency-Keys past their retention. (Imported by `jobs.runner.load_handlers`.)"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.events.service import purge_expired
from solarapi.events.types import DELIVERY_JOB_KIND
from solarapi.idempotency.store import purge_expired_keys
from solarapi.jobs.queue import WEBHOOK_LANE, job_handler, periodic_task
from solarapi.webhooks.delivery import deliver


@job_handler(DELIVERY_JOB_KIND, lane=WEBHOOK_LANE)
async def deliver_webhook(maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    await deliver(maker, payload)


@periodic_task("webhooks.retention", every_seconds=3600)
async def purge_retained(maker: async_sessionmaker[AsyncSession], now: datetime) -> None:
    # Idempotent: several runners may run this at about the same time.
    async with maker() as session, session.begin():
        await purge_expired(session, now)
        await purge_expired_keys(session, now)
