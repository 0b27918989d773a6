"""Reports through real processes: the embedded runner of `solarapi serve`, and
`solarapi worker` generating a report queued by the API."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI

from solarapi.config import Settings
from tests.reports.helpers import JUNE_1, make_system, parse_csv, upload_readings
from tests.support import Tenant, client_for, run_cli, served, settings_env

pytestmark = pytest.mark.slow
PERIOD = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-03T00:00:00Z", "interval": "1d"}


def env_for(settings: Settings, runner: str) -> dict[str, str]:
    return settings_env(
        settings,
        SOLARAPI_JOB_RUNNER=runner,
        SOLARAPI_REDIS_URL="",
        SOLARAPI_LOG_LEVEL="WARNING",
    )


# Liveness, not speed: the report is rendered in a process the server spawns, which on a
# 2-core machine running other suites took over 90 s once (the job was still `running`).
# The server logs at INFO so a failure's attached log shows the job's claim and its steps.
REPORT_DEADLINE_S = 300


async def test_serve_generates_reports_in_process(app: FastAPI, enterprise: Tenant) -> None:
    env = {**env_for(app.state.settings, "inline"), "SOLARAPI_LOG_LEVEL": "INFO"}
    with served(env) as server:
        headers = {"Authorization": f"Bearer {enterprise.live}"}
        async with httpx.AsyncClient(base_url=server.base, headers=headers, timeout=30) as client:
            system = await make_system(client, "Embedded", "Europe/Amsterdam")
            await upload_readings(client, system, JUNE_1, 96 * 2)
            created = await client.post(
                "/api/v1/reports", json={"type": "production", "format": "csv", **PERIOD}
            )
            assert created.status_code == 202, created.text
            url = created.headers["location"]
            deadline = time.monotonic() + REPORT_DEADLINE_S
            report = created.json()
            while report["status"] in ("queued", "running") and time.monotonic() < deadline:
                await asyncio.sleep(0.25)
                report = (await client.get(url)).json()
            assert report["status"] == "completed", report
            download = await client.get(report["download_url"])
    assert download.status_code == 200
    rows = parse_csv(download.content)
    assert [row["period_local"] for row in rows] == ["2025-06-01", "2025-06-02", "2025-06-03"]
    assert rows[0]["system_id"] == system["id"]


async def test_worker_command_generates_a_queued_report(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Worker", "Europe/Amsterdam")
        await upload_readings(client, system, JUNE_1, 96)
        created = (
            await client.post(
                "/api/v1/reports", json={"type": "production", "format": "pdf", **PERIOD}
            )
        ).json()
        result = run_cli(env_for(app.state.settings, "external"), "worker", "--once", process=True)
        report = (await client.get(f"/api/v1/reports/{created['id']}")).json()
        download = await client.get(f"/api/v1/reports/{created['id']}/download")
    assert "ran" in result.stderr
    assert report["status"] == "completed", report
    assert download.status_code == 200
    assert download.content.startswith(b"%PDF-")
    assert report["file"]["size_bytes"] == len(download.content)
