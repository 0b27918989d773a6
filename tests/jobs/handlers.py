"""Job kinds used by the job-runner tests. Imported by the tests and, through
`solarapi worker --handlers tests.jobs.handlers`, by worker subprocesses."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.jobs import repository
from solarapi.jobs.queue import (
    WEBHOOK_LANE,
    PermanentJobError,
    current_job,
    job_failure_handler,
    job_handler,
)
from solarapi.jobs.repository import ClaimedJob

FAILURES_SEEN: list[tuple[str, str]] = []


async def claim_job(
    maker: async_sessionmaker[AsyncSession],
    job_id: str,
    *,
    worker_id: str,
    kind: str,
    now: datetime,
    lease: timedelta,
) -> ClaimedJob:
    """Claim one particular job as `worker_id` (jobs claimed on the way stay with it, as a
    worker that then dies would leave them)."""
    while True:
        async with maker() as session, session.begin():
            claimed = await repository.claim(
                session, worker_id=worker_id, now=now, lease=lease, kinds={kind}
            )
        assert claimed is not None, f"job {job_id} was not claimable"
        if claimed.id == job_id:
            return claimed


def _append(path: str, line: str) -> None:
    # O_APPEND: lines from several processes never interleave within a line.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@job_handler("test.record")
async def record(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    job = current_job()
    assert job is not None
    _append(payload["path"], f"start {job.id} {job.attempt} {os.getpid()}")
    await asyncio.sleep(float(payload.get("sleep", 0)))
    _append(payload["path"], f"done {job.id} {job.attempt} {os.getpid()}")


@job_handler("test.rendezvous")
async def rendezvous(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    """Writes its start like `test.record`, then holds its worker's slot until jobs have
    started in `payload["processes"]` different processes (`payload["path"]`'s start lines),
    or `payload["timeout"]` seconds have passed (then it fails: the test sees it)."""
    job = current_job()
    assert job is not None
    path = payload["path"]
    _append(path, f"start {job.id} {job.attempt} {os.getpid()}")
    deadline = asyncio.get_running_loop().time() + float(payload["timeout"])
    while len(_started_pids(path)) < int(payload["processes"]):
        if asyncio.get_running_loop().time() > deadline:
            raise PermanentJobError(f"only {_started_pids(path)} started a job")
        await asyncio.sleep(0.02)
    _append(path, f"done {job.id} {job.attempt} {os.getpid()}")


def _started_pids(path: str) -> set[str]:
    with open(path) as log:
        return {line.split()[3] for line in log if line.startswith("start ")}


@job_handler("test.fail")
async def fail(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    raise RuntimeError(f"boom: {payload['why']}")


@job_handler("test.permanent")
async def permanent(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    raise PermanentJobError(f"cannot work: {payload['why']}")


@job_handler("test.flaky")
async def flaky(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    job = current_job()
    assert job is not None
    if job.attempt == 1:
        raise ConnectionError("upstream closed the connection")


@job_failure_handler("test.fail")
async def fail_hook(_session: AsyncSession, payload: dict[str, Any], error: str) -> None:
    FAILURES_SEEN.append((payload["why"], error))


@job_failure_handler("test.record")
async def record_hook(_session: AsyncSession, payload: dict[str, Any], error: str) -> None:
    FAILURES_SEEN.append((payload["path"], error))


# --- lanes ------------------------------------------------------------------------------------

# Set by a test to let the blocking job finish.
LANE_RELEASE: dict[str, asyncio.Event] = {}


@job_handler("test.lane.block")
async def lane_block(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    await LANE_RELEASE[payload["key"]].wait()


@job_handler("test.lane.hook", lane=WEBHOOK_LANE)
async def lane_hook(_maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    return None
