"""Job kinds that one area queues and another runs, named here so the area that asks does not
import the one that answers (an upload asks for an alert evaluation; alerts reads readings).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.jobs.queue import enqueue

# Run by `alerts.jobs`: evaluate one system's alert rules ({"system_id"}), and the 15-minute
# sweep over every system.
ALERTS_EVALUATE = "alerts.evaluate"
ALERTS_SWEEP = "alerts.sweep"


async def enqueue_alert_evaluation(session: AsyncSession, system_id: str) -> str:
    """Ask, in the caller's transaction, for an evaluation of the system's alert rules once
    the change commits (never inside the request that made it)."""
    return await enqueue(session, ALERTS_EVALUATE, {"system_id": system_id}, max_attempts=3)
