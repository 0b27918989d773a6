"""House-keeping of the readings area on the job runner."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.jobs.queue import periodic_task, settings_of
from solarapi.readings.partitions import AttachBusy, Maintenance, reading_partitions

log = logging.getLogger(__name__)


async def maintain_partitions(
    maker: async_sessionmaker[AsyncSession],
    now: datetime,
    retention_months: int | None,
    *,
    attempts: int = 30,
) -> Maintenance:
    """One pass of the partitions' upkeep. Creating months needs a moment when no write holds
    the tables (`AttachBusy`): tried `attempts` times, a second or so apart at most; if none
    comes, the months are left to the next run (three months ahead are kept, so a missed
    day costs nothing) and `AttachBusy` is raised."""
    async with maker() as session, session.begin():
        await reading_partitions(session).retire_empty_cut_over(session)
    for attempt in range(attempts):
        try:
            async with maker() as session, session.begin():
                return await reading_partitions(session).maintain(session, now, retention_months)
        except AttachBusy:
            if attempt == attempts - 1:
                raise
            log.info("partitions: the tables are busy; creating months again shortly")
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
    raise AssertionError("unreachable")


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
