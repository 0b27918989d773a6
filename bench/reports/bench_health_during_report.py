"""Benchmark: `GET /health` latency while the inline job runner generates a big PDF report.

    .venv/bin/python bench/reports/bench_reports.py setup              # once: the 50-system database
    .venv/bin/python bench/reports/bench_health_during_report.py        # the measurement

A real `solarapi serve` (embedded SQLite, inline job runner, one worker) on the database of
`bench_reports.py setup` (50 systems × 1 year of 15-minute readings). One client polls
`/health` back to back on a kept-alive connection; after a quiet baseline it requests a
`production` PDF for all 50 systems over 2024 (`1d` buckets, 313 pages), and keeps polling until
the report is completed. Reported: `/health` latency percentiles before and during generation
(target: p99 ≤ 50 ms during), and how long the report took.

BENCH_DATA_DIR as for bench_reports.py (default /tmp/solarapi-bench-reports).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import serving

DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR", "/tmp/solarapi-bench-reports"))
SECRET = "bench-secret-key-that-is-long-enough-0123456789"
BASELINE_SECONDS = 5.0


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return (
        f"n={len(ordered)}, median {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {at(0.99):.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


async def _poll_health(client: httpx.AsyncClient, until: asyncio.Event) -> list[float]:
    latencies: list[float] = []
    while not until.is_set():
        started = time.perf_counter()
        response = await client.get("/api/v1/health")
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return latencies


async def _measure(base: str, key: str, system_ids: list[str]) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=base, timeout=60) as health,
        httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as api,
    ):
        quiet = asyncio.Event()
        baseline = asyncio.create_task(_poll_health(health, quiet))
        await asyncio.sleep(BASELINE_SECONDS)
        quiet.set()
        before = await baseline

        done = asyncio.Event()
        during_task = asyncio.create_task(_poll_health(health, done))
        started = time.perf_counter()
        created = await api.post(
            "/api/v1/reports",
            json={
                "type": "production", "format": "pdf", "system_ids": system_ids,
                "from": "2024-01-01T00:00:00+01:00", "to": "2025-01-01T00:00:00+01:00",
                "interval": "1d",
            },
        )  # fmt: skip
        assert created.status_code == 202, created.text
        report_id = created.json()["id"]
        while True:
            status = (await api.get(f"/api/v1/reports/{report_id}")).json()
            if status["status"] in ("completed", "failed"):
                break
            await asyncio.sleep(0.5)
        seconds = time.perf_counter() - started
        done.set()
        during = await during_task
    print(f"report {status['status']} in {seconds:.1f} s ({status.get('file', {})})")
    print(f"/health before: {_percentiles(before)}")
    print(f"/health during: {_percentiles(during)}   (target p99 <= 50 ms)")


def main() -> None:
    from solarapi.config import Settings

    meta = json.loads((DATA_DIR / "bench.json").read_text())
    settings = Settings(data_dir=DATA_DIR, secret_key=SECRET)
    # A key of the setup's account (which owns the 50 systems), made by the service directly.
    key = asyncio.run(_key_for(settings, meta["account_id"]))
    env = {
        "SOLARAPI_DATA_DIR": str(DATA_DIR),
        "SOLARAPI_SECRET_KEY": SECRET,
        "SOLARAPI_JOB_RUNNER": "inline",
        "SOLARAPI_REDIS_URL": "",
    }
    with serving(env) as base:
        asyncio.run(_measure(base, key, meta["system_ids"]))


async def _key_for(settings: object, account_id: str) -> str:
    from solarapi.auth.service import create_key
    from solarapi.config import Settings
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.plans import Environment
    from solarapi.kit.timefmt import utcnow

    assert isinstance(settings, Settings)
    engine = create_oneshot_engine(settings)
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            _, new = await create_key(
                session, account_id=account_id, name="bench health", environment=Environment.LIVE,
                secret=settings.effective_secret_key, now=utcnow(),
            )  # fmt: skip
    finally:
        await engine.dispose()
    return new.key


if __name__ == "__main__":
    main()
