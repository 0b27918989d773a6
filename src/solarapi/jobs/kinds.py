"""Job kinds that one area queues and another runs, named here so the area that asks does not
import the one that answers (an upload asks for an alert evaluation; alerts reads readings).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.jobs.queue import PreparedJob, enqueue, prepare_job

# Run by `alerts.jobs`: evaluate one system's alert rules ({"system_id"}), and the 15-minute
# sweep over every system.
ALERTS_EVALUATE = "alerts.evaluate"
ALERTS_SWEEP = "alerts.sweep"


async def enqueue_alert_evaluation(session: AsyncSession, system_id: str) -> str:
    """Ask, in the caller's transaction, for an evaluation of the system's alert rules once
    the change commits (never inside the request that made it)."""
    job = alert_evaluation_job(system_id)
    return await enqueue(
        session, job.kind, {"system_id": system_id}, max_attempts=job.max_attempts, job_id=job.id
    )


def alert_evaluation_job(system_id: str) -> PreparedJob:
    """The job `enqueue_alert_evaluation` queues, for a caller that writes it itself."""
    return prepare_job(ALERTS_EVALUATE, {"system_id": system_id}, max_attempts=3)
