"""Running queued jobs: claim with a lease, heartbeat while the handler runs, retry with
backoff, fail with a readable error.

The same code runs in two places: inside the API process (embedded default, started by the
app's lifespan) and in `solarapi worker` processes (scale-out; any number of them against one
PostgreSQL database). A job is run by one worker at a time: the claim is atomic and a worker
that stops renewing its lease (crashed, killed, partitioned) loses the job to the next claim.
Delivery is at-least-once: a handler killed half-way runs again, so handlers are idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from solarapi.db import is_outage
from solarapi.jobs import repository
from solarapi.jobs.queue import (
    DEFAULT_LANE,
    FAILURE_HANDLERS,
    HANDLERS,
    LANES,
    PERIODIC_TASKS,
    WEBHOOK_LANE,
    JobContext,
    JobHandler,
    PermanentJobError,
    periodic_task,
    set_current_job,
)
from solarapi.jobs.repository import ClaimedJob
from solarapi.kit import cpu
from solarapi.kit.timefmt import utcnow

log = logging.getLogger("solarapi.jobs")

# Modules whose import registers job handlers. Optional ones may not exist yet in a checkout.
HANDLER_MODULES = (
    "solarapi.reports.jobs",
    "solarapi.webhooks.jobs",
    "solarapi.readings.jobs",
    "solarapi.alerts.jobs",
)

ABANDONED_ERROR = (
    "the worker running the last attempt stopped renewing its lease (it crashed or was killed)"
)
MAX_ERROR_CHARS = 2000
FINISHED_JOBS_KEPT = timedelta(days=30)


def load_handlers() -> None:
    for name in HANDLER_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


def warm_render_process() -> None:
    """Start the CPU process that renders report files and import the handlers there (the
    same seconds of matplotlib and reportlab), so the first report does not wait for them."""
    cpu.warm(*(name for name in HANDLER_MODULES if importlib.util.find_spec(name) is not None))


def new_worker_id(role: str) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    lease_seconds: float = 30.0
    # Renew well before expiry, so one slow database round trip does not lose the job.
    heartbeat_seconds: float | None = None
    backoff_base_seconds: float = 10.0
    backoff_cap_seconds: float = 3600.0

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)

    @property
    def heartbeat(self) -> float:
        return self.heartbeat_seconds or self.lease_seconds / 3


def retry_delay(attempt: int, settings: RunnerSettings) -> timedelta:
    """Exponential backoff with jitter (attempt 1 → ~base, 2 → ~2×base, …, capped)."""
    seconds = min(settings.backoff_base_seconds * 2 ** (attempt - 1), settings.backoff_cap_seconds)
    return timedelta(seconds=seconds * random.uniform(1.0, 1.25))


def describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


async def _fail_abandoned(
    maker: async_sessionmaker[AsyncSession], now: datetime, kinds: Collection[str]
) -> int:
    if not kinds:
        return 0
    async with maker() as session, session.begin():
        failed = await repository.fail_abandoned(session, now, ABANDONED_ERROR, kinds)
        for _job_id, kind, payload in failed:
            hook = FAILURE_HANDLERS.get(kind)
            if hook is not None:
                await hook(session, payload, ABANDONED_ERROR)
    for job_id, kind, _ in failed:
        log.warning("job %s (%s) failed: %s", job_id, kind, ABANDONED_ERROR)
    return len(failed)


async def _claim(
    maker: async_sessionmaker[AsyncSession],
    worker_id: str,
    settings: RunnerSettings,
    kinds: Collection[str],
    now: datetime,
    per_account: int | None = None,
) -> ClaimedJob | None:
    if not kinds:
        return None
    async with maker() as session:
        if not await repository.any_claimable(session, now, kinds):
            return None
    async with maker() as session, session.begin():
        return await repository.claim(
            session,
            worker_id=worker_id,
            now=now,
            lease=settings.lease,
            kinds=kinds,
            per_account=per_account,
        )


async def _call(
    handler: JobHandler, maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]
) -> None:
    await handler(maker, payload)


async def execute(
    maker: async_sessionmaker[AsyncSession],
    job: ClaimedJob,
    worker_id: str,
    settings: RunnerSettings,
    clock: Callable[[], datetime] = utcnow,
) -> str:
    """Run one claimed job to its outcome; returns the job's new status (or "lost")."""
    handler = HANDLERS[job.kind]
    started = time.monotonic()
    log.info("job started", extra=_job_fields(job, worker_id, "started"))
    set_current_job(JobContext(job.id, job.kind, job.attempt, job.max_attempts, worker_id))
    try:
        # The task copies the context, so the handler sees its JobContext.
        task: asyncio.Task[None] = asyncio.create_task(
            _call(handler, maker, job.payload), name=f"job {job.id}"
        )
    finally:
        set_current_job(None)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=settings.heartbeat)
            if done:
                break
            try:
                async with maker() as session, session.begin():
                    held = await repository.extend_lease(
                        session, job.id, worker_id, clock(), settings.lease
                    )
            except Exception:
                # A database hiccup: keep working; if it lasts, the lease expires and another
                # worker takes the job over, which the final write guards against.
                log.exception("job %s: could not renew the lease", job.id)
                continue
            if not held:
                log.warning(
                    "job %s: cancelled or taken over; stopping its handler",
                    job.id,
                    extra=_job_fields(job, worker_id, "lost", started),
                )
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                return "lost"
    except asyncio.CancelledError:
        # The runner is stopping: stop the handler and hand the job back uncounted.
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            async with maker() as session, session.begin():
                await repository.release(session, job.id, worker_id, clock())
        raise
    return await _record_outcome(maker, job, task, worker_id, settings, clock(), started)


def _job_fields(
    job: ClaimedJob, worker_id: str, event: str, started: float | None = None
) -> dict[str, object]:
    """What each job log line carries: one line when a job starts and one when it ends
    (finished, retrying, failed, lost), with how long it ran."""
    fields: dict[str, object] = {
        "job_id": job.id,
        "kind": job.kind,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "worker": worker_id,
        "event": event,
    }
    if started is not None:
        fields["duration_s"] = round(time.monotonic() - started, 3)
    return fields


async def _record_outcome(
    maker: async_sessionmaker[AsyncSession],
    job: ClaimedJob,
    task: asyncio.Task[None],
    worker_id: str,
    settings: RunnerSettings,
    now: datetime,
    started: float,
) -> str:
    exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
    async with maker() as session, session.begin():
        if exc is None:
            ok = await repository.mark_succeeded(session, job.id, worker_id, now)
            outcome = "finished" if ok else "lost"
            log.info(f"job {outcome}", extra=_job_fields(job, worker_id, outcome, started))
            return "succeeded" if ok else "lost"
        error = describe_error(exc)
        permanent = isinstance(exc, PermanentJobError)
        if not permanent and job.attempt < job.max_attempts:
            retry_at = now + retry_delay(job.attempt, settings)
            ok = await repository.schedule_retry(
                session, job.id, worker_id, error=error, run_at=retry_at
            )
            log.warning(
                "job %s (%s) attempt %d/%d failed, retry at %s: %s",
                job.id,
                job.kind,
                job.attempt,
                job.max_attempts,
                retry_at.isoformat(),
                error,
                exc_info=exc,
                extra=_job_fields(job, worker_id, "retrying", started),
            )
            return "queued" if ok else "lost"
        ok = await repository.mark_failed(session, job.id, worker_id, error=error, now=now)
        if not ok:
            return "lost"
        hook = FAILURE_HANDLERS.get(job.kind)
        if hook is not None:
            await hook(session, job.payload, error)
        log.error(
            "job %s (%s) failed for good: %s",
            job.id,
            job.kind,
            error,
            exc_info=exc,
            extra=_job_fields(job, worker_id, "failed", started),
        )
        return "failed"


async def run_pending(
    maker: async_sessionmaker[AsyncSession],
    worker_id: str,
    *,
    settings: RunnerSettings | None = None,
    kinds: Collection[str] | None = None,
    clock: Callable[[], datetime] = utcnow,
    max_jobs: int | None = None,
) -> int:
    """Claim and run due jobs one after the other until none is due; returns how many ran.
    For tests, `solarapi worker --once` and cron-style use."""
    load_handlers()
    settings = settings or RunnerSettings()
    wanted = set(HANDLERS) if kinds is None else set(kinds) & set(HANDLERS)
    await _fail_abandoned(maker, clock(), wanted)
    ran = 0
    while max_jobs is None or ran < max_jobs:
        job = await _claim(maker, worker_id, settings, wanted, clock())
        if job is None:
            break
        await execute(maker, job, worker_id, settings, clock)
        ran += 1
    return ran


# The longest wait between polls while they fail.
POLL_BACKOFF_CAP_SECONDS = 60.0


class _PollFailures:
    """The runner's polls while they fail: one log record when they start failing (a
    traceback only when the cause is not the database being unusable), one when they work
    again, and a wait that doubles from the poll interval up to `POLL_BACKOFF_CAP_SECONDS`."""

    def __init__(self, worker_id: str, poll_seconds: float) -> None:
        self._worker_id = worker_id
        self._poll_seconds = poll_seconds
        self._count = 0
        self._since: datetime | None = None

    async def failed(self, exc: Exception, engine: AsyncEngine | None) -> None:
        self._count += 1
        log.debug(
            "job runner %s: poll %d failed (%s); next in %g s",
            self._worker_id,
            self._count,
            type(exc).__name__,
            self.next_wait(),
        )
        if self._count > 1:
            return
        self._since = utcnow()
        if engine is not None and await is_outage(exc, engine):
            log.error(
                "job runner %s: the database is unusable (%s); no jobs run until it is back, "
                "polling less often meanwhile",
                self._worker_id,
                describe_error(exc),
            )
        else:
            log.exception("job runner %s: poll failed", self._worker_id)

    def succeeded(self) -> None:
        if self._count:
            log.warning(
                "job runner %s: polls work again after %d failed since %s",
                self._worker_id,
                self._count,
                self._since.isoformat() if self._since else "?",
            )
        self._count = 0
        self._since = None

    def next_wait(self) -> float:
        if not self._count:
            return self._poll_seconds
        wait: float = self._poll_seconds * float(2 ** min(self._count, 16))
        return min(wait, max(POLL_BACKOFF_CAP_SECONDS, self._poll_seconds))


@dataclass(frozen=True, slots=True)
class Lane:
    """Slots of a runner for the job kinds of one lane (`job_handler(kind, lane)`), and how
    many jobs of the lane one account may run at once (across every runner)."""

    slots: int
    per_account: int


def default_lanes(concurrency: int) -> dict[str, Lane]:
    """Reports and the rest: `concurrency` slots, half of them (at least one) per account.
    Webhook deliveries, which mostly wait on other people's servers: twice as many slots
    (at least 4), half per account."""
    webhooks = max(4, 2 * concurrency)
    return {
        DEFAULT_LANE: Lane(concurrency, max(1, concurrency // 2)),
        WEBHOOK_LANE: Lane(webhooks, max(1, webhooks // 2)),
    }


class JobRunner:
    """A long-running runner polling for due jobs, with slots of their own for each lane
    (`default_lanes(concurrency)`) and accounts taken in turn within a lane."""

    def __init__(
        self,
        maker: async_sessionmaker[AsyncSession],
        *,
        worker_id: str,
        concurrency: int = 4,
        poll_seconds: float = 1.0,
        settings: RunnerSettings | None = None,
        kinds: Collection[str] | None = None,
        lanes: dict[str, Lane] | None = None,
        cpu_off_loop: bool = False,
    ) -> None:
        self.maker = maker
        # In an API process: the jobs' CPU-bound steps go to the CPU process (`cpu.off_loop`).
        self.cpu_off_loop = cpu_off_loop
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.lanes = lanes or default_lanes(concurrency)
        self._lane_tasks: dict[str, set[asyncio.Task[str]]] = {name: set() for name in self.lanes}
        self.poll_seconds = poll_seconds
        self.settings = settings or RunnerSettings()
        self.kinds = kinds
        self._tasks: set[asyncio.Task[str]] = set()
        self._main: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._periodic_due: dict[str, float] = {}

    def start(self) -> None:
        self._main = asyncio.create_task(self.run(), name=f"job runner {self.worker_id}")

    async def run(self) -> None:
        load_handlers()
        if self.cpu_off_loop:
            cpu.OFF_LOOP.set(True)  # this task's context, which its jobs' tasks copy
        loop = asyncio.get_running_loop()
        next_reap = 0.0
        failing = _PollFailures(self.worker_id, self.poll_seconds)
        while not self._stopping.is_set():
            try:
                if loop.time() >= next_reap:
                    await _fail_abandoned(self.maker, utcnow(), self._wanted())
                    next_reap = loop.time() + self.settings.lease_seconds / 2
                await self._run_periodic(loop.time())
                await self._fill_slots()
            except Exception as exc:
                # The database may be unusable for a while; the runner must outlive that
                # without a traceback a second (1.3 GB of log a day): it logs once and waits
                # longer each time, up to a minute.
                await failing.failed(exc, self.maker.kw.get("bind"))
            else:
                failing.succeeded()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), failing.next_wait())

    def _wanted(self) -> set[str]:
        return set(HANDLERS) if self.kinds is None else set(self.kinds) & set(HANDLERS)

    async def _fill_slots(self) -> None:
        wanted = self._wanted()
        for name, lane in self.lanes.items():
            kinds = {kind for kind in wanted if self._lane_of(kind) == name}
            running = self._lane_tasks[name]
            while kinds and len(running) < lane.slots and not self._stopping.is_set():
                job = await _claim(
                    self.maker, self.worker_id, self.settings, kinds, utcnow(), lane.per_account
                )
                if job is None:
                    break
                task = asyncio.create_task(
                    execute(self.maker, job, self.worker_id, self.settings), name=f"run {job.id}"
                )
                self._tasks.add(task)
                running.add(task)
                task.add_done_callback(self._job_done)

    def _lane_of(self, kind: str) -> str:
        lane = LANES.get(kind, DEFAULT_LANE)
        return lane if lane in self.lanes else DEFAULT_LANE

    def _job_done(self, task: asyncio.Task[str]) -> None:
        self._tasks.discard(task)
        for running in self._lane_tasks.values():
            running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "job runner %s: job bookkeeping failed", self.worker_id, exc_info=task.exception()
            )

    async def _run_periodic(self, now: float) -> None:
        for name, (every, task) in list(PERIODIC_TASKS.items()):
            due = self._periodic_due.get(name)
            if due is None:
                # Spread runners out a little so they do not all clean up at once.
                due = now + random.uniform(0, min(every, 5.0))
                self._periodic_due[name] = due
            if now < due:
                continue
            self._periodic_due[name] = now + every
            try:
                await task(self.maker, utcnow())
            except Exception:
                log.exception("periodic task %s failed", name)

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop claiming; let running jobs finish for `grace_seconds`, then hand them back."""
        self._stopping.set()
        if self._main is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._main
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)


@periodic_task("jobs.purge_finished", every_seconds=3600)
async def _purge_finished_jobs(maker: async_sessionmaker[AsyncSession], now: datetime) -> None:
    async with maker() as session, session.begin():
        await repository.purge_finished(session, now - FINISHED_JOBS_KEPT)


async def start_inline_runner(app: FastAPI) -> None:
    """Start background job processing inside the API process (embedded mode)."""
    # Imported here, during start-up, not in the runner's first turn: the handlers pull in
    # matplotlib and reportlab, seconds of import that would otherwise stall the event loop
    # while the server already answers (GET /health timed out its database check meanwhile).
    load_handlers()
    if app.state.settings.warm_start:
        warm_render_process()
    runner = JobRunner(
        app.state.sessionmaker,
        worker_id=new_worker_id("inline"),
        concurrency=2,
        cpu_off_loop=True,
    )
    app.state.job_runner = runner
    runner.start()


async def stop_inline_runner(app: FastAPI) -> None:
    runner: JobRunner | None = getattr(app.state, "job_runner", None)
    if runner is not None:
        await runner.stop()
    cpu.stop()  # the runner has handed its jobs back: a render still going is abandoned
