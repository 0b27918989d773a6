"""A `solarapi worker` killed (SIGKILL) while rendering a report: another worker takes the
job over once the lease expires, and the report completes exactly once."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import time
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from solarapi.jobs import repository as jobs_repository
from solarapi.models.reports import Report
from solarapi.models.webhooks import Event
from tests.jobs.test_workers import worker
from tests.reports.helpers import JUNE_1, create_report, make_system, upload_readings
from tests.support import Tenant, client_for

pytestmark = pytest.mark.slow


async def test_report_survives_a_killed_worker(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    settings = app.state.settings
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Crash test", "Europe/Amsterdam")
        await upload_readings(client, system, JUNE_1, 96 * 2)
        report = await create_report(
            client, type="production", format="csv", from_="2025-06-01T00:00:00Z",
            to="2025-06-03T00:00:00Z", interval="1h",
        )  # fmt: skip
        url = f"/api/v1/reports/{report['id']}"

        async def status() -> str:
            return str((await client.get(url)).json()["status"])

        started = tmp_path / "rendering"
        slow = {"REPORT_RENDER_DELAY": "600", "REPORT_RENDER_STARTED": str(started)}
        with worker(settings, "--handlers", "tests.reports.slow_render", "--lease", "2",
                    env=slow) as first:  # fmt: skip
            deadline = time.monotonic() + 90
            while not started.exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert started.exists(), "the worker never started rendering"
            assert await status() == "running"
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        assert await status() == "running"  # nobody finishes it for the dead worker

        # Only the killed worker's lease must run out quickly; the one that takes over holds
        # its claim long enough that a busy machine cannot let it lapse mid-render (a lapse
        # made it claim the job again: attempt 3, seen at load 13-18).
        with worker(settings, "--lease", "60"):
            deadline = time.monotonic() + 120
            while await status() != "completed" and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        done = (await client.get(url)).json()
        download = await client.get(f"{url}/download")

    assert done["status"] == "completed", done
    assert download.status_code == 200
    assert hashlib.sha256(download.content).hexdigest() == done["file"]["sha256"]
    async with app.state.sessionmaker() as session:
        stored = await session.get(Report, report["id"])
        assert stored is not None
        job = await jobs_repository.get_job(session, stored.job_id)  # type: ignore[arg-type]
        events = (
            await session.scalars(
                select(Event).where(
                    Event.account_id == enterprise.account_id, Event.type == "report.completed"
                )
            )
        ).all()
    assert job is not None
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert stored.file_name == f"{report['id']}-2.csv"  # written by the second attempt
    assert [event.data["id"] for event in events] == [report["id"]]  # completed once
