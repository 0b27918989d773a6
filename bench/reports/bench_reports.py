"""Benchmark: a `production` report for 50 systems × 1 year of `1d` buckets, CSV and PDF.

    .venv/bin/python bench/reports/bench_reports.py setup   # once: database with the readings
    .venv/bin/python bench/reports/bench_reports.py run     # generation time and peak memory

`run` generates each format in a fresh process (so one report's memory does not hide in the
other's), through the real path: the report row and job are created by the service, then one
`run_pending` call claims the job, reads the readings (daily rollups), renders and stores the
file. Measured: wall and CPU time (all threads) of that call, and the process's peak RSS
(ru_maxrss) before and after it — the "after" figure is what a worker needs. On a shared,
busy machine the wall time runs well above the CPU time; the CPU time is what one idle core
would take.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR", "/tmp/solarapi-bench-reports"))
SYSTEMS = 50
YEAR_START = datetime(2024, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2025, 1, 1, tzinfo=UTC)
SECRET = "bench-secret-key-that-is-long-enough-0123456789"


def settings():  # type: ignore[no-untyped-def]
    from solarapi.config import Settings

    return Settings(data_dir=DATA_DIR, secret_key=SECRET, job_runner="external")


def principal_for(account_id: str):  # type: ignore[no-untyped-def]
    from solarapi.auth.principal import Principal
    from solarapi.kit.plans import Environment, Plan

    now = datetime.now(UTC)
    return Principal(account_id, "Benchmark BV", Plan.ENTERPRISE, Environment.LIVE, "key_bench",
                     "bench", "", now, None)  # fmt: skip


async def _setup() -> None:
    from solarapi.accounts.service import create_account
    from solarapi.db import create_engine, sessionmaker_for
    from solarapi.kit.plans import Plan
    from solarapi.readings.upload import store_series
    from solarapi.systems.schemas import SystemCreate
    from solarapi.systems.service import create_system

    config = settings()
    engine = create_engine(config)
    maker = sessionmaker_for(engine, config)
    now = datetime.now(UTC)
    async with maker() as session, session.begin():
        account = await create_account(
            session, name="Benchmark BV", email=f"bench-{time.time_ns()}@example.com",
            password="benchmark password", plan=Plan.ENTERPRISE, now=now,
        )  # fmt: skip
    account_id = account.account.id
    principal = principal_for(account_id)
    starts = np.arange(int(YEAR_START.timestamp()), int(YEAR_END.timestamp()), 900, dtype=np.int64)
    hours = (starts % 86400) / 3600
    rng = np.random.default_rng(7)
    system_ids = []
    for n in range(SYSTEMS):
        capacity = 5.0 + n * 3.5
        body = SystemCreate.model_validate({
            "name": f"Bench system {n + 1:02d}",
            "capacity_kwp": capacity,
            "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
        })  # fmt: skip
        async with maker() as session, session.begin():
            system = await create_system(session, principal, body, now)
            shape = np.clip(np.sin((hours - 5) / 14 * np.pi), 0, None)
            energy = np.round(capacity * 220 * shape * rng.uniform(0.3, 1.0, len(starts)), 3)
            power = np.round(energy * 4.4, 1)
            await store_series(session, system, starts, energy, power)
            system_ids.append(system.id)
        print(f"system {n + 1}/{SYSTEMS} with {len(starts):,} readings", flush=True)
    (DATA_DIR / "bench.json").write_text(
        json.dumps({"account_id": account_id, "system_ids": system_ids})
    )
    await engine.dispose()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _generate(report_format: str) -> dict[str, object]:
    from solarapi.db import create_engine, sessionmaker_for
    from solarapi.jobs.runner import load_handlers, run_pending
    from solarapi.reports.parameters import ReportParameters
    from solarapi.reports.schemas import ReportCreate
    from solarapi.reports.service import JOB_KIND, create_report
    from solarapi.reports.service import get_report as fetch

    load_handlers()
    # Warm the imports the generator uses lazily, so they count as baseline, not as the report.
    import solarapi.reports.pdffile  # noqa: F401

    meta = json.loads((DATA_DIR / "bench.json").read_text())
    config = settings()
    engine = create_engine(config)
    maker = sessionmaker_for(engine, config)
    principal = principal_for(meta["account_id"])
    body = ReportCreate.model_validate({
        "type": "production", "format": report_format, "system_ids": meta["system_ids"],
        "from": "2024-01-01T00:00:00+01:00", "to": "2025-01-01T00:00:00+01:00", "interval": "1d",
    })  # fmt: skip
    async with maker() as session, session.begin():
        now = datetime.now(UTC)
        report = await create_report(
            session, principal, ReportParameters.from_request(body, now), now
        )
    baseline = _rss_mb()
    started = time.perf_counter()
    cpu_started = time.process_time()
    ran = await run_pending(maker, "bench", kinds={JOB_KIND})
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    async with maker() as session:
        done = await fetch(session, principal, report.id)
    await engine.dispose()
    if done.status != "completed":
        raise SystemExit(f"report not completed ({ran} job(s) ran): {done.status} {done.error}")
    return {
        "format": report_format,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "rss_before_mb": round(baseline, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
        "size_bytes": done.size_bytes,
        "file": str(config.effective_reports_dir / (done.file_name or "")),
    }


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    if command == "setup":
        from solarapi.migrate import upgrade

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        upgrade(settings())
        asyncio.run(_setup())
    elif command == "one":
        print(json.dumps(asyncio.run(_generate(sys.argv[2]))))
    elif command == "run":
        for report_format in ("csv", "pdf"):
            out = subprocess.run(
                [sys.executable, __file__, "one", report_format],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            result = json.loads(out.stdout.strip().splitlines()[-1])
            extra = ""
            if report_format == "pdf":
                import pypdf

                extra = f", {len(pypdf.PdfReader(str(result['file'])).pages)} pages"
            print(
                f"{report_format}: {result['seconds']} s wall ({result['cpu_seconds']} s CPU), "
                f"peak RSS {result['peak_rss_mb']} MB "
                f"(before generation {result['rss_before_mb']} MB), "
                f"{int(str(result['size_bytes'])):,} bytes{extra}"
            )
    else:
        raise SystemExit(f"unknown command {command!r}: use setup or run")


if __name__ == "__main__":
    main()
