"""Real `solarapi worker` processes: a worker killed mid-job, and two workers sharing a queue."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI

from solarapi.config import Settings
from solarapi.jobs import repository
from solarapi.jobs.queue import enqueue
from solarapi.models.jobs import Job
from tests.support import settings_env, started_worker

pytestmark = pytest.mark.slow


@contextmanager
def worker(
    settings: Settings, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A `solarapi worker` with the test handlers, polling often, on the database of
    `settings`. Its log goes next to the database, for whoever debugs a failure."""
    with started_worker(
        {**settings_env(settings, SOLARAPI_LOG_LEVEL="WARNING"), **(env or {})},
        *("--handlers", "tests.jobs.handlers", "--poll", "0.1", *args),
        log=settings.data_dir / "worker-stderr.log",
    ) as proc:
        yield proc


async def load(app: FastAPI, job_id: str) -> Job:
    async with app.state.sessionmaker() as session:
        job = await repository.get_job(session, job_id)
    assert job is not None
    return job


async def wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not reached in time")


async def test_killed_worker_job_is_taken_up_again_and_completes_once(
    app: FastAPI, tmp_path: Path
) -> None:
    settings: Settings = app.state.settings
    log = tmp_path / "log"
    async with app.state.sessionmaker() as session, session.begin():
        job_id = await enqueue(session, "test.record", {"path": str(log), "sleep": 4})

    with worker(settings, "--lease", "2") as first:
        await wait_for(lambda: _started(log), timeout=90)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    killed = await load(app, job_id)
    assert (killed.status, killed.attempts) == ("running", 1)

    # The second worker's lease is long: with a 2-second one, a heartbeat delayed on a busy
    # machine let the lease lapse mid-job and the same worker take the job up a third time
    # (correct behaviour for a lapsed lease, not what this test is about).
    with worker(settings, "--lease", "60") as second:
        await wait_for(lambda: _succeeded(app, job_id), timeout=120)
        second_pid = second.pid
    job = await load(app, job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "start", "done"]
    assert lines[1:] == [f"start {job_id} 2 {second_pid}", f"done {job_id} 2 {second_pid}"]
    assert lines[0].startswith(f"start {job_id} 1 ")


async def test_two_workers_never_run_the_same_job(app: FastAPI, tmp_path: Path) -> None:
    # The scale-out setup is PostgreSQL (SKIP LOCKED); on SQLite the same test proves the
    # atomic claim holds between processes too.
    # Both take part whatever the machine's load: each worker has 4 slots and the queue
    # starts with 5 jobs that hold their slot until jobs have started in two processes, so
    # the first worker up cannot take them all (nor the 120 after them) before the second
    # is up: one of the five waits for it.
    settings: Settings = app.state.settings
    log = tmp_path / "log"
    async with app.state.sessionmaker() as session, session.begin():
        ids = [
            await enqueue(
                session, "test.rendezvous", {"path": str(log), "processes": 2, "timeout": 120}
            )
            for _ in range(5)
        ]
        ids += [
            await enqueue(session, "test.record", {"path": str(log), "sleep": 0.02})
            for _ in range(120)
        ]

    async def all_done() -> bool:
        async with app.state.sessionmaker() as session:
            jobs = [await repository.get_job(session, job_id) for job_id in ids]
        return all(job is not None and job.status == "succeeded" for job in jobs)

    with (
        # (a long lease: a heartbeat late on a busy machine must not hand a job to the other)
        worker(settings, "--concurrency", "4", "--lease", "120") as one,
        worker(settings, "--concurrency", "4", "--lease", "120") as two,
    ):
        await wait_for(all_done, timeout=180)
        pids = {str(one.pid), str(two.pid)}
    starts = [line.split() for line in log.read_text().splitlines() if line.startswith("start")]
    per_job = Counter(parts[1] for parts in starts)
    assert set(per_job) == set(ids)
    assert set(per_job.values()) == {1}
    assert {parts[3] for parts in starts} == pids  # both took part
    for job_id in ids:
        assert (await load(app, job_id)).attempts == 1


async def _started(log: Path) -> bool:
    return log.exists() and "start" in log.read_text()


async def _succeeded(app: FastAPI, job_id: str) -> bool:
    return (await load(app, job_id)).status == "succeeded"
