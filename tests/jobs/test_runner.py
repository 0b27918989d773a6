"""The job runner on both databases: claims, leases, retries, failure, cancellation."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.jobs import repository
from solarapi.jobs.queue import cancel_job, enqueue
from solarapi.jobs.runner import ABANDONED_ERROR, RunnerSettings, execute, run_pending
from solarapi.kit.timefmt import utcnow
from solarapi.logs import JsonFormatter
from solarapi.models.jobs import Job
from tests.jobs import handlers
from tests.jobs.handlers import claim_job

FAST = RunnerSettings(lease_seconds=30, backoff_base_seconds=10)


def maker_of(app: FastAPI) -> async_sessionmaker[AsyncSession]:
    return app.state.sessionmaker  # type: ignore[no-any-return]


async def add_job(app: FastAPI, kind: str, payload: dict[str, object], **kw: int) -> str:
    async with maker_of(app)() as session, session.begin():
        return await enqueue(session, kind, payload, **kw)  # type: ignore[arg-type]


async def load(app: FastAPI, job_id: str) -> Job:
    async with maker_of(app)() as session:
        job = await repository.get_job(session, job_id)
    assert job is not None
    return job


async def test_enqueue_is_part_of_the_callers_transaction(app: FastAPI, tmp_path: Path) -> None:
    async with maker_of(app)() as session:
        rolled_back = await enqueue(session, "test.record", {"path": str(tmp_path / "x")})
        await session.rollback()
    async with maker_of(app)() as session:
        assert await repository.get_job(session, rolled_back) is None

    log = tmp_path / "log"
    job_id = await add_job(app, "test.record", {"path": str(log)})
    queued = await load(app, job_id)
    assert (queued.status, queued.attempts) == ("queued", 0)

    ran = await run_pending(maker_of(app), "w1", kinds={"test.record"})
    assert ran >= 1
    done = await load(app, job_id)
    assert (done.status, done.attempts, done.lease_owner) == ("succeeded", 1, None)
    assert done.finished_at is not None
    assert log.read_text().count(f"done {job_id} 1") == 1


async def test_failures_retry_with_backoff_then_fail_with_the_error(app: FastAPI) -> None:
    handlers.FAILURES_SEEN.clear()
    why = f"case-{utcnow().timestamp()}"
    job_id = await add_job(app, "test.fail", {"why": why}, max_attempts=3)
    now = utcnow()
    clock_at: list[datetime] = [now]

    def clock() -> datetime:
        return clock_at[0]

    await run_pending(maker_of(app), "w1", kinds={"test.fail"}, settings=FAST, clock=clock)
    first = await load(app, job_id)
    assert (first.status, first.attempts) == ("queued", 1)
    assert first.last_error == f"RuntimeError: boom: {why}"
    # Backoff: attempt 1 waits base × [1, 1.25] seconds.
    assert now + timedelta(seconds=10) <= first.run_at <= now + timedelta(seconds=12.5)

    # Not due yet: nothing runs.
    await run_pending(maker_of(app), "w1", kinds={"test.fail"}, settings=FAST, clock=clock)
    assert (await load(app, job_id)).attempts == 1

    clock_at[0] = now + timedelta(seconds=13)
    await run_pending(maker_of(app), "w1", kinds={"test.fail"}, settings=FAST, clock=clock)
    second = await load(app, job_id)
    assert (second.status, second.attempts) == ("queued", 2)
    # Attempt 2 waits twice as long.
    assert second.run_at >= clock_at[0] + timedelta(seconds=20)

    clock_at[0] = now + timedelta(hours=1)
    await run_pending(maker_of(app), "w1", kinds={"test.fail"}, settings=FAST, clock=clock)
    final = await load(app, job_id)
    assert (final.status, final.attempts) == ("failed", 3)
    assert final.last_error == f"RuntimeError: boom: {why}"
    assert [seen for seen in handlers.FAILURES_SEEN if seen[0] == why] == [
        (why, f"RuntimeError: boom: {why}")
    ]

    # A failed job is final: later polls leave it alone.
    clock_at[0] = now + timedelta(days=1)
    await run_pending(maker_of(app), "w1", kinds={"test.fail"}, settings=FAST, clock=clock)
    assert (await load(app, job_id)).attempts == 3


async def test_permanent_error_fails_without_retry(app: FastAPI) -> None:
    job_id = await add_job(app, "test.permanent", {"why": "system deleted"}, max_attempts=5)
    await run_pending(maker_of(app), "w1", kinds={"test.permanent"})
    job = await load(app, job_id)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.last_error == "PermanentJobError: cannot work: system deleted"


async def test_transient_error_then_success(app: FastAPI) -> None:
    job_id = await add_job(app, "test.flaky", {})
    await run_pending(maker_of(app), "w1", kinds={"test.flaky"})
    assert (await load(app, job_id)).status == "queued"
    later = utcnow() + timedelta(minutes=5)
    await run_pending(maker_of(app), "w1", kinds={"test.flaky"}, clock=lambda: later)
    job = await load(app, job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert job.last_error == "ConnectionError: upstream closed the connection"


async def test_expired_lease_is_taken_over_by_another_worker(app: FastAPI, tmp_path: Path) -> None:
    log = tmp_path / "log"
    job_id = await add_job(app, "test.record", {"path": str(log)})
    now = utcnow()
    # A worker claims the job and dies before doing anything.
    await claim_job(
        maker_of(app),
        job_id,
        worker_id="dead",
        kind="test.record",
        now=now,
        lease=timedelta(seconds=30),
    )
    # While the lease holds, nobody else may take it.
    await run_pending(maker_of(app), "w2", kinds={"test.record"})
    held = await load(app, job_id)
    assert (held.status, held.lease_owner) == ("running", "dead")

    later = now + timedelta(seconds=31)
    await run_pending(maker_of(app), "w2", kinds={"test.record"}, clock=lambda: later)
    job = await load(app, job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert log.read_text().splitlines() == [
        f"start {job_id} 2 {_pid()}",
        f"done {job_id} 2 {_pid()}",
    ]


async def test_worker_dying_on_last_attempt_fails_the_job(app: FastAPI, tmp_path: Path) -> None:
    handlers.FAILURES_SEEN.clear()
    path = str(tmp_path / "never")
    job_id = await add_job(app, "test.record", {"path": path}, max_attempts=1)
    now = utcnow()
    await claim_job(
        maker_of(app),
        job_id,
        worker_id="dead",
        kind="test.record",
        now=now,
        lease=timedelta(seconds=5),
    )
    later = now + timedelta(seconds=6)
    await run_pending(maker_of(app), "w2", kinds={"test.record"}, clock=lambda: later)
    job = await load(app, job_id)
    assert (job.status, job.last_error) == ("failed", ABANDONED_ERROR)
    seen = list(handlers.FAILURES_SEEN)
    assert seen == [(path, ABANDONED_ERROR)]
    assert not Path(path).exists()


async def test_cancelling_a_running_job_stops_its_handler(app: FastAPI, tmp_path: Path) -> None:
    log = tmp_path / "log"
    job_id = await add_job(app, "test.record", {"path": str(log), "sleep": 30})
    settings = RunnerSettings(lease_seconds=0.6)
    claimed = await claim_job(
        maker_of(app),
        job_id,
        worker_id="w1",
        kind="test.record",
        now=utcnow(),
        lease=settings.lease,
    )
    running = asyncio.create_task(execute(maker_of(app), claimed, "w1", settings))
    deadline = time.monotonic() + 60
    while not log.exists():
        assert time.monotonic() < deadline, "the handler never started"
        await asyncio.sleep(0.02)
    async with maker_of(app)() as session, session.begin():
        assert await cancel_job(session, job_id)
    # The handler sleeps 30 s: an outcome well before that is the cancellation's doing.
    outcome = await asyncio.wait_for(running, timeout=25)
    assert outcome == "lost"
    job = await load(app, job_id)
    assert job.status == "cancelled"
    assert log.read_text().splitlines() == [f"start {job_id} 1 {_pid()}"]
    # Cancelling a finished job is refused.
    async with maker_of(app)() as session, session.begin():
        assert not await cancel_job(session, job_id)


async def test_concurrent_claims_never_hand_out_a_job_twice(app: FastAPI) -> None:
    ids = set()
    async with maker_of(app)() as session, session.begin():
        for n in range(40):
            ids.add(await enqueue(session, "test.claimrace", {"n": n}))
    claimed: list[str] = []

    async def claimer(worker: str) -> None:
        while True:
            async with maker_of(app)() as session, session.begin():
                job = await repository.claim(
                    session,
                    worker_id=worker,
                    now=utcnow(),
                    lease=timedelta(seconds=30),
                    kinds={"test.claimrace"},
                )
            if job is None:
                return
            claimed.append(job.id)
            await asyncio.sleep(0)

    await asyncio.gather(*(claimer(f"w{n}") for n in range(6)))
    mine = [job_id for job_id in claimed if job_id in ids]
    assert sorted(mine) == sorted(ids)
    assert len(set(mine)) == len(mine)


def _pid() -> int:
    import os

    return os.getpid()


def test_retry_delay_doubles_with_jitter_and_is_capped() -> None:
    from solarapi.jobs.runner import retry_delay

    settings = RunnerSettings(backoff_base_seconds=10, backoff_cap_seconds=300)
    for attempt, base in ((1, 10), (2, 20), (3, 40), (5, 160), (6, 300), (20, 300)):
        for _ in range(20):
            seconds = retry_delay(attempt, settings).total_seconds()
            assert base <= seconds <= base * 1.25


def test_report_errors_shown_to_clients_hide_internals() -> None:
    from solarapi.reports.jobs import client_error

    assert client_error("ReportFailed: system sys_1 was deleted", "rpt_1") == (
        "system sys_1 was deleted"
    )
    assert "interrupted" in client_error(ABANDONED_ERROR, "rpt_1")
    generic = client_error("OperationalError: (sqlite3) no such table: readings", "rpt_1")
    assert "rpt_1" in generic
    assert "sqlite" not in generic
    assert "OperationalError" not in generic


async def test_each_job_logs_when_it_starts_and_how_it_ends_with_its_duration(
    app: FastAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="solarapi.jobs")
    done = await add_job(app, "test.record", {"path": str(tmp_path / "log")})
    failed = await add_job(app, "test.permanent", {"why": "no system"}, max_attempts=5)
    await run_pending(maker_of(app), "w-log", kinds={"test.record", "test.permanent"})
    lines = [orjson.loads(JsonFormatter().format(r)) for r in caplog.records]
    events = {
        (line["job_id"], line["event"]): line
        for line in lines
        if line.get("job_id") in (done, failed)
    }
    assert set(events) == {
        (done, "started"),
        (done, "finished"),
        (failed, "started"),
        (failed, "failed"),
    }
    finished = events[(done, "finished")]
    assert (finished["msg"], finished["level"], finished["kind"]) == (
        "job finished",
        "info",
        "test.record",
    )
    assert finished["duration_s"] >= 0
    assert finished["worker"] == "w-log"
    assert events[(failed, "failed")]["level"] == "error"
    assert events[(failed, "failed")]["attempt"] == 1
    assert "duration_s" not in events[(done, "started")]


async def test_a_lanes_statements_built_once_bind_each_calls_time_lease_and_worker(
    app: FastAPI,
) -> None:
    """The peek, the claim and the finish are built once per lane and reused (their time,
    lease and worker bound at each call): a job due in five minutes is not claimable now and
    is later, in the same cached statements, and the claim writes that call's values."""
    now = utcnow().replace(microsecond=0)
    later = now + timedelta(minutes=6)
    async with maker_of(app)() as session, session.begin():
        await repository.insert_job(
            session, job_id="job_due_later", kind="test.later", payload={},
            run_at=now + timedelta(minutes=5), max_attempts=2, now=now,
        )  # fmt: skip
    for _ in range(2):  # the second round runs the statements the first one built
        async with maker_of(app)() as session:
            assert not await repository.any_claimable(session, now, {"test.later"})
            assert await repository.any_claimable(session, later, {"test.later"})
            assert not await repository.any_claimable(session, later, {"test.other"})
    for worker, at in (("early", now), ("on-time", later)):
        async with maker_of(app)() as session, session.begin():
            claimed = await repository.claim(
                session, worker_id=worker, now=at, lease=timedelta(seconds=30),
                kinds={"test.later"}, per_account=1,
            )  # fmt: skip
        assert (claimed is None) == (worker == "early")
    job = await load(app, "job_due_later")
    assert (job.status, job.lease_owner, job.attempts) == ("running", "on-time", 1)
    assert (job.started_at, job.heartbeat_at) == (later, later)
    assert job.lease_expires_at == later + timedelta(seconds=30)
    async with maker_of(app)() as session, session.begin():
        assert not await repository.mark_succeeded(session, job.id, "early", later)
        assert await repository.mark_succeeded(session, job.id, "on-time", later)
    done = await load(app, "job_due_later")
    assert (done.status, done.lease_owner, done.finished_at) == ("succeeded", None, later)
