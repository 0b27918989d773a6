"""SQL of the job queue. Every state change is one guarded UPDATE, so two workers racing for
the same row cannot both win: the claim picks a row with `FOR UPDATE SKIP LOCKED` on
PostgreSQL; on SQLite the single UPDATE statement runs under the database's one write lock.
Finishing writes are guarded on `lease_owner` so a worker that lost its lease changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Update,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from solarapi.db import session_backend
from solarapi.models.base import UtcDateTime
from solarapi.models.jobs import Job, JobStatus

_JOBS = Job.metadata.tables[Job.__tablename__]


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: str
    kind: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int


async def insert_job(
    session: AsyncSession,
    *,
    job_id: str,
    kind: str,
    payload: dict[str, Any],
    run_at: datetime,
    max_attempts: int,
    now: datetime,
    account_id: str | None = None,
) -> None:
    await session.execute(
        insert(Job).values(
            id=job_id,
            kind=kind,
            account_id=account_id,
            payload=payload,
            status=JobStatus.QUEUED,
            attempts=0,
            max_attempts=max_attempts,
            run_at=run_at,
            created_at=now,
        )
    )


def _claimable(job: Any, now: Any, kinds: Collection[str]) -> ColumnElement[bool]:
    # Due queued jobs, and running jobs whose worker stopped renewing its lease (it died) and
    # that still have an attempt left; exhausted ones are failed by `fail_abandoned`.
    return and_(
        job.kind.in_(list(kinds)),
        or_(
            and_(job.status == JobStatus.QUEUED.value, job.run_at <= now),
            and_(
                job.status == JobStatus.RUNNING.value,
                job.lease_expires_at < now,
                job.attempts < job.max_attempts,
            ),
        ),
    )


async def any_claimable(session: AsyncSession, now: datetime, kinds: Collection[str]) -> bool:
    """A read-only peek, so an idle poller does not take SQLite's write lock every second."""
    row = await session.execute(_peek_statement(tuple(sorted(kinds))), {"now": now})
    return row.first() is not None


# A runner polls every second per lane and claims once per job, always with the same kinds:
# the statements are built once per lane (the time, the lease and the worker are bound at
# each run). Built anew, the ORM's expression building cost ~220 µs a poll and several times
# that a claim, before SQLAlchemy's cache found the compiled SQL by the statement's key.
_NOW = bindparam("now", type_=UtcDateTime())


@functools.cache
def _peek_statement(kinds: tuple[str, ...]) -> Select[str]:
    return select(Job.id).where(_claimable(Job, _NOW, kinds)).limit(1)


async def claim(
    session: AsyncSession,
    *,
    worker_id: str,
    now: datetime,
    lease: timedelta,
    kinds: Collection[str],
    per_account: int | None = None,
) -> ClaimedJob | None:
    """Take the next due job of `kinds`. Fair across accounts: the job of the account that
    runs the fewest jobs of these kinds now goes first (then the oldest), and an account
    already running `per_account` of them waits (None: no cap; a job of no account is never
    capped). A capped claim holds the claim lock to the end of its transaction, so claims
    across workers count one after the other and the cap is exact on both databases (on
    PostgreSQL two claims reading at once would otherwise both count one job fewer)."""
    if per_account is not None:
        await session_backend(session).hold_lock(session, "jobs.claim", _JOBS)
    statement = _claim_statement(tuple(sorted(kinds)), per_account)
    params = {"now": now, "lease_until": now + lease, "worker": worker_id}
    row = (await session.execute(statement, params)).first()
    if row is None:
        return None
    return ClaimedJob(row.id, row.kind, dict(row.payload), row.attempts, row.max_attempts)


@functools.cache
def _claim_statement(kinds: tuple[str, ...], per_account: int | None) -> Update:
    """`claim`'s UPDATE for one lane: bound `now`, `lease_until` and `worker`."""
    candidate = aliased(Job)
    other = aliased(Job)
    # Aliases, so the subqueries are not correlated to the UPDATE's own table.
    running = (
        select(func.count())
        .select_from(other)
        .where(
            other.account_id == candidate.account_id,
            other.kind.in_(kinds),
            other.status == JobStatus.RUNNING.value,
            other.lease_expires_at >= _NOW,
        )
        .correlate(candidate)
        .scalar_subquery()
    )
    conditions = [_claimable(candidate, _NOW, kinds)]
    if per_account is not None:
        conditions.append(or_(candidate.account_id.is_(None), running < per_account))
    picked = (
        select(candidate.id)
        .where(*conditions)
        .order_by(running, candidate.run_at, candidate.id)
        .limit(1)
        .with_for_update(of=candidate, skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(Job)
        # The condition is repeated: on PostgreSQL a row another claimer changed between the
        # subquery and the update is re-checked here and skipped instead of claimed twice.
        .where(Job.id == picked, _claimable(Job, _NOW, kinds))
        .values(
            status=JobStatus.RUNNING,
            attempts=Job.attempts + 1,
            lease_owner=bindparam("worker", type_=Job.lease_owner.type),
            lease_expires_at=bindparam("lease_until", type_=UtcDateTime()),
            heartbeat_at=_NOW,
            started_at=func.coalesce(Job.started_at, _NOW),
        )
        .returning(Job.id, Job.kind, Job.payload, Job.attempts, Job.max_attempts)
        .execution_options(synchronize_session=False)
    )


async def _update_held(
    session: AsyncSession, job_id: str, worker_id: str, values: dict[str, Any]
) -> bool:
    """Change a job this worker holds; False (nothing changed) when it no longer does."""
    params = {f"new_{name}": value for name, value in values.items()}
    result = await session.execute(
        _held_update(tuple(values)), {"job_id": job_id, "worker": worker_id, **params}
    )
    return result.first() is not None


@functools.cache
def _held_update(names: tuple[str, ...]) -> Update:
    """The guarded UPDATE of the columns `names` (bound as `new_<name>`), built once each."""
    columns = _JOBS.columns
    return (
        update(Job)
        .where(
            Job.id == bindparam("job_id"),
            Job.lease_owner == bindparam("worker"),
            Job.status == JobStatus.RUNNING.value,
        )
        .values({name: bindparam(f"new_{name}", type_=columns[name].type) for name in names})
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )


_RELEASED: dict[str, Any] = {"lease_owner": None, "lease_expires_at": None}


async def extend_lease(
    session: AsyncSession, job_id: str, worker_id: str, now: datetime, lease: timedelta
) -> bool:
    return await _update_held(
        session, job_id, worker_id, {"lease_expires_at": now + lease, "heartbeat_at": now}
    )


async def touch_lease(session: AsyncSession, job_id: str, worker_id: str, now: datetime) -> bool:
    return await _update_held(session, job_id, worker_id, {"heartbeat_at": now})


async def mark_succeeded(session: AsyncSession, job_id: str, worker_id: str, now: datetime) -> bool:
    values = {"status": JobStatus.SUCCEEDED.value, "finished_at": now, **_RELEASED}
    return await _update_held(session, job_id, worker_id, values)


async def schedule_retry(
    session: AsyncSession, job_id: str, worker_id: str, *, error: str, run_at: datetime
) -> bool:
    values = {"status": JobStatus.QUEUED.value, "run_at": run_at, "last_error": error}
    return await _update_held(session, job_id, worker_id, {**values, **_RELEASED})


async def mark_failed(
    session: AsyncSession, job_id: str, worker_id: str, *, error: str, now: datetime
) -> bool:
    values = {"status": JobStatus.FAILED.value, "last_error": error, "finished_at": now}
    return await _update_held(session, job_id, worker_id, {**values, **_RELEASED})


async def release(session: AsyncSession, job_id: str, worker_id: str, now: datetime) -> bool:
    """Give a job back without counting the attempt (a worker shutting down cleanly)."""
    values = {"status": JobStatus.QUEUED.value, "attempts": Job.attempts - 1, "run_at": now}
    return await _update_held(session, job_id, worker_id, {**values, **_RELEASED})


async def fail_abandoned(
    session: AsyncSession, now: datetime, error: str, kinds: Collection[str]
) -> list[tuple[str, str, dict[str, Any]]]:
    """Fail running jobs whose worker died on their last attempt; returns (id, kind, payload).
    Only `kinds` this worker knows, so their failure hooks are there to run."""
    result = await session.execute(
        update(Job)
        .where(
            Job.kind.in_(list(kinds)),
            Job.status == JobStatus.RUNNING.value,
            Job.lease_expires_at < now,
            Job.attempts >= Job.max_attempts,
        )
        .values(
            status=JobStatus.FAILED,
            last_error=error,
            finished_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )
        .returning(Job.id, Job.kind, Job.payload)
        .execution_options(synchronize_session=False)
    )
    return [(row.id, row.kind, dict(row.payload)) for row in result]


async def cancel(session: AsyncSession, job_id: str, now: datetime) -> bool:
    result = await session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.status.in_([JobStatus.QUEUED.value, JobStatus.RUNNING.value]),
        )
        .values(
            status=JobStatus.CANCELLED,
            finished_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def get_job(session: AsyncSession, job_id: str) -> Job | None:
    return await session.get(Job, job_id, populate_existing=True)


async def purge_finished(session: AsyncSession, before: datetime) -> int:
    """Delete finished jobs older than `before` (the table is a queue, not an archive)."""
    result = await session.execute(
        delete(Job)
        .where(
            Job.status.in_(
                [JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value]
            ),
            Job.finished_at < before,
        )
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return len(result.all())


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One job kind's queue, for the operator metrics."""

    kind: str
    due: int  # queued and due now: the backlog
    scheduled: int  # queued for later (webhook retries)
    running: int
    oldest_due_at: datetime | None


async def queue_stats(session: AsyncSession, now: datetime) -> list[QueueStats]:
    """Queued and running jobs by kind (both statuses are on the `(status, run_at)` index;
    finished jobs are not read)."""
    due = and_(Job.status == JobStatus.QUEUED.value, Job.run_at <= now)
    rows = await session.execute(
        select(
            Job.kind,
            func.count().filter(due),
            func.count().filter(Job.status == JobStatus.QUEUED.value, Job.run_at > now),
            func.count().filter(Job.status == JobStatus.RUNNING.value),
            func.min(Job.run_at).filter(due),
        )
        .where(Job.status.in_([JobStatus.QUEUED.value, JobStatus.RUNNING.value]))
        .group_by(Job.kind)
    )
    return [
        QueueStats(kind, int(due_count), int(scheduled), int(running), oldest)
        for kind, due_count, scheduled, running, oldest in rows
    ]
