"""CPU of the alert evaluation through the database, as the job runner does it.

Builds a fresh database (embedded SQLite in a temporary directory, or `--database-url` for a
PostgreSQL database to create tables in) with `--systems` metered systems holding the last
38 days of 15-minute readings (the sandbox model, so zeros only at night), then measures the
process CPU of:

- `evaluate_system` for every system, one transaction each (the job after an upload: reads
  38 days, runs every rule), three times: the first pass also fills the process's caches
  (each site's turbidity cell, and the sun and clear sky of each system's window in
  `sky.PROCESS_SKY`); before the second the sky cache is emptied (a system the process has
  not evaluated lately, on a known cell: the usual case of a fleet larger than the cache);
  the third finds everything cached (the next upload of a system the process evaluated), and
- `sweep` (the 15-minute pass: the offline rule for every system), once with every system
  reporting (the usual case) and once with every system silent for a day (the worst case).

Scaled to 10,000 systems. The database server's own CPU (PostgreSQL) is not in the figure.
Usage: `.venv/bin/python bench/alerts/database_pass.py [--systems 200]`.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import text

from solarapi.accounts.service import create_account
from solarapi.alerts.service import evaluate_system, sweep
from solarapi.alerts.sky import PROCESS_SKY
from solarapi.config import Settings
from solarapi.db import create_engine, sessionmaker_for
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from solarapi.models.systems import System
from solarapi.readings.upload import store_series
from solarapi.sandbox.model import PvParams, quarter_hour_energy

SECRET = "bench-secret-key-that-is-long-enough-0123456789"
NOW = datetime(2025, 6, 30, 12, 0, tzinfo=UTC)
DAYS = 38


async def run(settings: Settings, count: int) -> None:
    engine = create_engine(settings)  # pooled, as the job runner's
    maker = sessionmaker_for(engine)
    async with maker() as session, session.begin():
        owner = await create_account(
            session, name="Bench alerts", email=f"bench-{uuid.uuid4().hex[:8]}@example.com",
            password="bench password 123", plan=Plan.PRO, now=NOW,
        )  # fmt: skip
    end = int(NOW.timestamp())
    starts = np.arange(end - DAYS * 86400, end, 900, dtype=np.int64)
    ids: list[str] = []
    began = time.perf_counter()
    for number in range(count):
        latitude, longitude = 45.0 + (number % 15), -5.0 + (number % 20)
        params = PvParams(
            f"sys_bench_db_{number}", latitude, longitude, "UTC", 8.0, None, 30.0, 180.0
        )
        energy = quarter_hour_energy(params, starts)
        async with maker() as session, session.begin():
            system = System(
                id=new_id("sys"), account_id=owner.account.id, environment="live",
                name=f"Alerts {number}", status="active", data_source="metered",
                capacity_kwp=8.0, latitude=latitude, longitude=longitude, timezone="UTC",
                tilt_deg=30.0, azimuth_deg=180.0, created_at=NOW, updated_at=NOW,
            )  # fmt: skip
            session.add(system)
            await session.flush()
            await store_series(session, system, starts, energy, energy * 4)
            ids.append(system.id)
    print(f"built {count} systems × {DAYS} days in {time.perf_counter() - began:.0f} s", flush=True)
    if settings.is_postgres:
        # Autovacuum may be off (it is on the benchmark machine): statistics for the planner.
        async with engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(text("VACUUM ANALYZE"))

    # The first pass also reads each site's turbidity cell from pvlib's data file and
    # computes each window's sun (both kept in the process afterwards); the second computes
    # the sun again (the cache emptied); the third is a worker's next upload of a system.
    passes = []
    for number in range(3):
        if number == 1:
            PROCESS_SKY.clear()
        cpu = time.process_time()
        for system_id in ids:
            async with maker() as session, session.begin():
                await evaluate_system(session, system_id, NOW)
        passes.append((time.process_time() - cpu) / count)
    cold, uncached, per_system = passes
    cpu = time.process_time()
    await sweep(maker, NOW)
    sweep_reporting = (time.process_time() - cpu) / count
    cpu = time.process_time()
    await sweep(maker, NOW + timedelta(days=1))
    sweep_silent = (time.process_time() - cpu) / count
    await engine.dispose()
    print(f"evaluate_system, first pass: {cold * 1000:.1f} ms CPU per system")
    print(
        f"evaluate_system, turbidity known, sun not cached: {uncached * 1000:.1f} ms CPU per system"
    )
    print(
        f"evaluate_system: {per_system * 1000:.1f} ms CPU per system → {per_system * 10_000:.0f} CPU s per 10,000"
    )
    print(
        f"sweep, systems reporting: {sweep_reporting * 1000:.2f} ms per system → {sweep_reporting * 10_000:.1f} CPU s per 10,000"
    )
    print(
        f"sweep, systems silent a day (opens 10,000 alerts): {sweep_silent * 1000:.1f} ms per system → {sweep_silent * 10_000:.0f} CPU s per 10,000"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--database-url", default=None, help="an empty PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings(data_dir=Path(directory), secret_key=SECRET, job_runner="external")
        if args.database_url:
            settings = settings.model_copy(update={"database_url": args.database_url})
        upgrade(settings)
        asyncio.run(run(settings, args.systems))


if __name__ == "__main__":
    main()
