"""Tenant fairness on the job queue, on both databases: accounts are taken in turn and capped,
webhook deliveries have slots of their own, an endpoint that keeps timing out stops taking
slots (circuit breaker), and one account's pending and kept reports are capped."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.errors import RateLimited
from solarapi.jobs import repository
from solarapi.jobs.queue import enqueue
from solarapi.jobs.runner import JobRunner, Lane
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow
from solarapi.models.jobs import Job
from solarapi.models.reports import Report
from solarapi.reports.parameters import ReportParameters
from solarapi.reports.schemas import ReportCreate
from solarapi.reports.service import ReportQuota, create_report
from tests.jobs import handlers
from tests.jobs.test_runner import load, maker_of
from tests.reports.helpers import make_system
from tests.support import Tenant, client_for

DEADLINE_S = 60


async def _claim(app: FastAPI, kind: str, per_account: int | None) -> str | None:
    async with maker_of(app)() as session, session.begin():
        job = await repository.claim(
            session,
            worker_id="fair",
            now=utcnow(),
            lease=timedelta(seconds=60),
            kinds={kind},
            per_account=per_account,
        )
    return None if job is None else job.id


async def test_the_claim_takes_accounts_in_turn_and_caps_each(app: FastAPI) -> None:
    kind = f"test.fair.{uuid.uuid4().hex[:8]}"
    big, small = new_id("acct"), new_id("acct")
    start = utcnow() - timedelta(minutes=10)
    async with maker_of(app)() as session, session.begin():
        # Eight older jobs of one account, then one of another.
        bigs = [
            await enqueue(
                session, kind, {"n": n}, account_id=big, run_at=start + timedelta(seconds=s)
            )
            for s, n in enumerate(range(8))
        ]
        other = await enqueue(
            session, kind, {}, account_id=small, run_at=start + timedelta(seconds=9)
        )
    assert await _claim(app, kind, per_account=1) == bigs[0]
    # The other account's job goes next, ahead of seven older ones.
    assert await _claim(app, kind, per_account=1) == other
    assert await _claim(app, kind, per_account=1) is None  # both accounts at their cap
    assert await _claim(app, kind, per_account=2) == bigs[1]
    assert await _claim(app, kind, per_account=None) == bigs[2]


async def test_webhook_deliveries_have_slots_of_their_own(app: FastAPI) -> None:
    key = uuid.uuid4().hex
    handlers.LANE_RELEASE[key] = asyncio.Event()
    async with maker_of(app)() as session, session.begin():
        blocker = await enqueue(session, "test.lane.block", {"key": key})
        hook = await enqueue(session, "test.lane.hook", {})
    runner = JobRunner(
        maker_of(app),
        worker_id="lanes",
        poll_seconds=0.05,
        kinds={"test.lane.block", "test.lane.hook"},
        lanes={"default": Lane(1, 1), "webhooks": Lane(1, 1)},
    )
    runner.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while (await load(app, hook)).status != "succeeded":
            assert time.monotonic() < deadline, "the delivery waited behind the other lane"
            await asyncio.sleep(0.05)
        assert (await load(app, blocker)).status == "running"
    finally:
        handlers.LANE_RELEASE[key].set()
        await runner.stop(grace_seconds=30)
    assert (await load(app, blocker)).status == "succeeded"


PERIOD = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"}


async def test_pending_and_kept_reports_are_capped_per_account(
    app: FastAPI, enterprise: Tenant
) -> None:
    try:
        await _quota_scenario(app, enterprise)
    finally:
        # Its queued report jobs must not be run by later tests that drain every kind.
        async with maker_of(app)() as session, session.begin():
            await session.execute(
                update(Job)
                .where(Job.account_id == enterprise.account_id, Job.status == "queued")
                .values(status="cancelled", finished_at=utcnow())
            )


async def _quota_scenario(app: FastAPI, enterprise: Tenant) -> None:
    settings = app.state.settings
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Roof", "Europe/Amsterdam")
        body = {"type": "production", "format": "csv", "system_ids": [system["id"]], **PERIOD}
        for _ in range(settings.reports_pending_per_account):
            assert (await client.post("/api/v1/reports", json=body)).status_code == 202
        refused = await client.post("/api/v1/reports", json=body)
        assert refused.status_code == 429, refused.text
        assert refused.json()["code"] == "rate_limit"
        assert refused.headers["retry-after"].isdigit()
        assert "queued or running" in refused.json()["error"]

        # None pending, the most kept: 409 until one is deleted.
        async with maker_of(app)() as session, session.begin():
            await session.execute(
                update(Report)
                .where(Report.account_id == enterprise.account_id)
                .values(status="completed", file_name="x.csv")
            )
            for _ in range(
                settings.reports_kept_per_account - settings.reports_pending_per_account
            ):
                session.add(
                    Report(
                        id=new_id("rpt"),
                        account_id=enterprise.account_id,
                        environment="live",
                        type="production",
                        format="csv",
                        status="completed",
                        parameters={},
                        created_at=utcnow(),
                        file_name="x.csv",
                    )
                )
        full = await client.post("/api/v1/reports", json=body)
        assert full.status_code == 409, full.text
        assert full.json()["code"] == "conflict"
        assert "delete some" in full.json()["error"]
        listed = (await client.get("/api/v1/reports", params={"limit": 1})).json()["data"]
        async with maker_of(app)() as session, session.begin():
            await session.execute(
                update(Report).where(Report.id == listed[0]["id"]).values(file_name=None)
            )
        assert (await client.post("/api/v1/reports", json=body)).status_code == 202


# Two transactions at the same moment: the second must wait for the first and count what it
# added. On PostgreSQL the second's backend is seen waiting on a lock before the first
# commits; on SQLite the second waits on the database's write lock (or runs after the commit),
# so either way it counts the first's row.


async def _backend_pid(session: AsyncSession) -> int | None:
    if session.get_bind().dialect.name != "postgresql":
        return None
    return int((await session.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _until_waiting(app: FastAPI, second: asyncio.Task[Any], pid: asyncio.Future[Any]) -> None:
    """Until the second transaction waits on a lock (PostgreSQL), or has ended: without the
    lock it would not wait, and the caller's assertion on its result fails."""
    backend_pid = await pid
    if backend_pid is None:
        return
    deadline = time.monotonic() + DEADLINE_S
    while not second.done():
        async with maker_of(app)() as session:
            waiting = (
                await session.execute(
                    text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"),
                    {"pid": backend_pid},
                )
            ).scalar()
        if waiting == "Lock":
            return
        assert time.monotonic() < deadline, "the second transaction neither waited nor ended"
        await asyncio.sleep(0.01)


async def test_a_capped_claim_counts_the_claim_still_in_flight(app: FastAPI) -> None:
    kind = f"test.fair.{uuid.uuid4().hex[:8]}"
    account = new_id("acct")
    start = utcnow() - timedelta(minutes=10)
    async with maker_of(app)() as session, session.begin():
        jobs = [
            await enqueue(
                session, kind, {}, account_id=account, run_at=start + timedelta(seconds=n)
            )
            for n in range(2)
        ]
    pid: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    async def second_claim() -> str | None:
        async with maker_of(app)() as session, session.begin():
            pid.set_result(await _backend_pid(session))
            job = await repository.claim(
                session,
                worker_id="second",
                now=utcnow(),
                lease=timedelta(seconds=60),
                kinds={kind},
                per_account=1,
            )
        return None if job is None else job.id

    async with maker_of(app)() as first, first.begin():
        claimed = await repository.claim(
            first,
            worker_id="first",
            now=utcnow(),
            lease=timedelta(seconds=60),
            kinds={kind},
            per_account=1,
        )
        assert claimed is not None
        assert claimed.id == jobs[0]
        second = asyncio.ensure_future(second_claim())
        await _until_waiting(app, second, pid)
    # The account runs one job now, its cap: the second claim, counted after the first
    # committed, takes nothing.
    assert await second is None
    assert (await load(app, jobs[1])).status == "queued"


async def test_two_reports_at_once_do_not_pass_the_pending_quota(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Roof", "Europe/Amsterdam")
    body = ReportCreate.model_validate(
        {"type": "production", "format": "csv", "system_ids": [system["id"]], **PERIOD}
    )
    caller = Caller(enterprise.account_id, Environment.LIVE)
    quota = ReportQuota(pending=1, kept=10)
    pid: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    async def second_report() -> str:
        async with maker_of(app)() as session, session.begin():
            pid.set_result(await _backend_pid(session))
            now = utcnow()
            try:
                await create_report(
                    session, caller, ReportParameters.from_request(body, now), now, quota
                )
            except RateLimited as refused:
                return str(refused)
        return "created"

    try:
        async with maker_of(app)() as first, first.begin():
            now = utcnow()
            await create_report(first, caller, ReportParameters.from_request(body, now), now, quota)
            second = asyncio.ensure_future(second_report())
            await _until_waiting(app, second, pid)
        assert "1 reports queued or running" in await second
        async with maker_of(app)() as session:
            count = select(func.count()).where(Report.account_id == enterprise.account_id)
            assert (await session.execute(count)).scalar_one() == 1
    finally:
        async with maker_of(app)() as session, session.begin():
            await session.execute(
                update(Job)
                .where(Job.account_id == enterprise.account_id, Job.status == "queued")
                .values(status="cancelled", finished_at=utcnow())
            )
