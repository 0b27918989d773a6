"""Plain functions the reports tests share: systems with known readings, running the report
jobs, and reading back what the API returns."""

from __future__ import annotations

import asyncio
import csv
import io
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI

from solarapi.jobs.runner import run_pending
from solarapi.reports.service import JOB_KIND

T = TypeVar("T")

QUARTER = timedelta(minutes=15)
# Long past in every zone, so every bucket has ended.
JUNE_1 = datetime(2025, 6, 1, tzinfo=UTC)


async def make_system(
    client: httpx.AsyncClient,
    name: str,
    timezone: str,
    capacity_kwp: float = 10.0,
    market_zone: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "capacity_kwp": capacity_kwp,
        "location": {"latitude": 52.0, "longitude": 5.0, "timezone": timezone},
    }
    if market_zone is not None:
        body["market_zone"] = market_zone
    response = await client.post("/api/v1/systems", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def solar_wh(index: int, capacity_kwp: float) -> float:
    """A distinct value per quarter-hour, following the sun of a UTC day roughly."""
    hour = (index % 96) / 4
    shape = max(0.0, math.sin((hour - 4) / 16 * math.pi))
    return round(capacity_kwp * 240 * shape + (index % 7) * 0.375, 3)


async def upload_readings(
    client: httpx.AsyncClient,
    system: dict[str, Any],
    start: datetime,
    quarters: int,
    *,
    skip: set[int] | None = None,
) -> None:
    capacity = float(system["capacity_kwp"])
    items = [
        {
            "timestamp": (start + i * QUARTER).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "energy_wh": solar_wh(i, capacity),
            "power_w": round(solar_wh(i, capacity) * 4 * 1.1, 1),
        }
        for i in range(quarters)
        if i not in (skip or set())
    ]
    for first in range(0, len(items), 10_000):
        response = await client.post(
            f"/api/v1/systems/{system['id']}/readings",
            json={"readings": items[first : first + 10_000]},
        )
        assert response.status_code == 200, response.text


async def run_report_jobs(app: FastAPI) -> int:
    return await run_pending(app.state.sessionmaker, "reports-test", kinds={JOB_KIND})


async def create_report(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    if "from_" in body:
        body["from"] = body.pop("from_")
    response = await client.post("/api/v1/reports", json=body)
    assert response.status_code == 202, response.text
    report: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/api/v1/reports/{report['id']}"
    return report


async def completed(client: httpx.AsyncClient, app: FastAPI, report_id: str) -> dict[str, Any]:
    await run_report_jobs(app)
    response = await client.get(f"/api/v1/reports/{report_id}")
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    assert report["status"] == "completed", report
    return report


def parse_csv(data: bytes) -> list[dict[str, str]]:
    text = data.decode("utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def number(text: str) -> float | None:
    return None if text == "" else float(text)


async def in_thread(function: Callable[..., T], *args: object) -> T:
    """Stands in for `kit.cpu.run_in_process` in tests that replace the renderer: a replaced
    function exists only in this process, so the file is produced in a thread of it."""
    return await asyncio.to_thread(function, *args)
