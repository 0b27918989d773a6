"""House-keeping of the readings area on the job runner."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.jobs.queue import periodic_task, settings_of
from solarapi.readings.partitions import Maintenance, reading_partitions

log = logging.getLogger(__name__)


async def maintain_partitions(
    maker: async_sessionmaker[AsyncSession], now: datetime, retention_months: int | None
) -> Maintenance:
    async with maker() as session, session.begin():
        await reading_partitions(session).retire_empty_cut_over(session)
    async with maker() as session, session.begin():
        return await reading_partitions(session).maintain(session, now, retention_months)


# Daily: partitions exist three months ahead, so a runner that stops for weeks loses nothing
# (and the default partition catches what no month holds).
@periodic_task("readings.partitions", every_seconds=86_400)
async def _maintain_partitions(maker: async_sessionmaker[AsyncSession], now: datetime) -> None:
    done = await maintain_partitions(maker, now, settings_of(maker).readings_retention_months)
    if done.created or done.dropped or done.purged_rows:
        log.info(
            "readings partitions: created %s, dropped %s, %d row(s) past retention removed",
            list(done.created), list(done.dropped), done.purged_rows,
        )  # fmt: skip
