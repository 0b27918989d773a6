"""The job queue's public entry points; webhook deliveries and reports both run on it.

- `enqueue(session, kind, payload, run_at=None, max_attempts=5)` adds a job in the caller's
  transaction, so a job exists if and only if the change that asked for it committed.
- `job_handler(kind, lane="default")` registers the coroutine that runs jobs of that kind, in
  a lane: each lane has slots of its own in every runner (webhook deliveries, which wait on
  other people's servers, never take the slots of reports, and the reverse). A handler commits its
  own work through the sessionmaker it is given; it may run again after a crash or an error
  (at-least-once), so it must be idempotent: guard its final write on the state it expects.
- `job_failure_handler(kind)` registers a coroutine called, in the same transaction that marks
  the job `failed`, once the job has used up its attempts (or its last worker died). Use it to
  show the failure on the object the job works for.
- `current_job()` / `lease_held(session)` let a handler see its attempt number and make its
  final write conditional on still holding the job (a worker whose lease expired must not
  finish a job another worker has taken over).
- `PermanentJobError`: raise it for a failure that retrying cannot fix; the job fails at once.
- `periodic_task(name, every_seconds)` registers house-keeping (e.g. removing expired report
  files) that every runner calls on that period; it must be idempotent, as several runners may
  call it at about the same time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.config import Settings
from solarapi.jobs import repository
from solarapi.kit.ids import new_id
from solarapi.kit.timefmt import utcnow

JobHandler = Callable[[async_sessionmaker[AsyncSession], dict[str, Any]], Awaitable[None]]
FailureHandler = Callable[[AsyncSession, dict[str, Any], str], Awaitable[None]]
PeriodicTask = Callable[[async_sessionmaker[AsyncSession], datetime], Awaitable[None]]
HANDLERS: dict[str, JobHandler] = {}
DEFAULT_LANE = "default"
WEBHOOK_LANE = "webhooks"
# The lane of each kind (`job_handler`).
LANES: dict[str, str] = {}
FAILURE_HANDLERS: dict[str, FailureHandler] = {}
PERIODIC_TASKS: dict[str, tuple[float, PeriodicTask]] = {}


class PermanentJobError(Exception):
    """A failure that another attempt would repeat (bad input, deleted object): fail now."""


@dataclass(frozen=True, slots=True)
class JobContext:
    id: str
    kind: str
    attempt: int
    max_attempts: int
    worker_id: str


_current: ContextVar[JobContext | None] = ContextVar("solarapi_current_job", default=None)


def current_job() -> JobContext | None:
    """The job the calling handler is running (None outside a job)."""
    return _current.get()


def set_current_job(context: JobContext | None) -> None:
    _current.set(context)


def settings_of(maker: async_sessionmaker[AsyncSession]) -> Settings:
    """The settings of the app or worker running a handler (`db.sessionmaker_for` puts them on
    the sessionmaker); the environment's when the sessionmaker carries none."""
    info = maker.kw.get("info") or {}
    settings = info.get("settings")
    return settings if isinstance(settings, Settings) else Settings()


def job_handler(kind: str, lane: str = DEFAULT_LANE) -> Callable[[JobHandler], JobHandler]:
    def register(handler: JobHandler) -> JobHandler:
        HANDLERS[kind] = handler
        LANES[kind] = lane
        return handler

    return register


def job_failure_handler(kind: str) -> Callable[[FailureHandler], FailureHandler]:
    def register(handler: FailureHandler) -> FailureHandler:
        FAILURE_HANDLERS[kind] = handler
        return handler

    return register


def periodic_task(name: str, every_seconds: float) -> Callable[[PeriodicTask], PeriodicTask]:
    def register(task: PeriodicTask) -> PeriodicTask:
        PERIODIC_TASKS[name] = (every_seconds, task)
        return task

    return register


async def enqueue(
    session: AsyncSession,
    kind: str,
    payload: dict[str, Any],
    *,
    run_at: datetime | None = None,
    max_attempts: int = 5,
    account_id: str | None = None,
    job_id: str | None = None,
) -> str:
    """Queue a job of `kind` in the caller's transaction; returns the job id. `account_id`:
    whose job it is (runners take accounts in turn and cap each one's running jobs); None
    for the service's own. A given `job_id` makes the job unique: queueing it again fails
    with the database's IntegrityError (how several runners schedule one periodic job
    between them)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    now = utcnow()
    job_id = job_id or new_id("job")
    await repository.insert_job(
        session,
        job_id=job_id,
        kind=kind,
        payload=payload,
        run_at=run_at or now,
        max_attempts=max_attempts,
        now=now,
        account_id=account_id,
    )
    return job_id


@dataclass(frozen=True, slots=True)
class PreparedJob:
    """A job as `enqueue` would queue it, for a caller that writes it in one statement with
    the change that asks for it (the readings upload, `readings.store`): queued, no attempt
    made, due at `run_at`; `payload` is JSON text."""

    id: str
    kind: str
    payload: str
    max_attempts: int
    run_at: datetime
    account_id: str | None = None


def prepare_job(
    kind: str, payload: dict[str, Any], *, max_attempts: int = 5, account_id: str | None = None
) -> PreparedJob:
    """The values of a job `enqueue` would add now (see `PreparedJob`)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    return PreparedJob(
        new_id("job"), kind, orjson.dumps(payload).decode(), max_attempts, utcnow(), account_id
    )


async def cancel_job(session: AsyncSession, job_id: str) -> bool:
    """Cancel a queued or running job in the caller's transaction. A running handler notices at
    its next heartbeat and is stopped. Returns False when the job had already finished."""
    return await repository.cancel(session, job_id, utcnow())


async def lease_held(session: AsyncSession) -> bool:
    """In the caller's transaction: does this worker still hold the current job? Takes the job
    row's lock on PostgreSQL, so a takeover cannot slip in before the caller commits."""
    context = current_job()
    if context is None:
        return True
    return await repository.touch_lease(session, context.id, context.worker_id, utcnow())
