"""Portfolio and change-feed benchmark, in one process (app and client on one event loop).

Builds a fleet of N metered systems × D days of quarter-hours (directly through
`readings.upload.store_series`, which also fills the change log), then measures:

1. `GET /portfolio/readings?interval=1d` over the D days for the whole fleet (pages of up to
   1,000 systems) against N per-system `GET /systems/{id}/readings` requests for the same
   numbers: process CPU-seconds of each (app and client together: the client side is the
   same small httpx cost per request on both sides, so the ratio understates the server's
   saving), and the portfolio request's latency percentiles. Per-system bodies are kept while
   the database is unchanged (`kit.versioned`), so each round writes one reading first: both
   sides are measured uncached.
2. The change feed: rows/s streamed as NDJSON (`limit` 100,000) from the start, and how many
   requests one day of the whole fleet takes.

    .venv/bin/python bench/portfolio/run.py --systems 200 --days 31 [--postgres URL]

Figures on this busy 2-core machine are noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.migrate import upgrade

START = datetime(2025, 5, 1, tzinfo=UTC) - timedelta(hours=2)  # local midnight, Amsterdam
SECRET = "bench-secret-key-that-is-long-enough-0123456789"


async def build(app: object, systems: int, days: int) -> tuple[str, list[str]]:
    from solarapi.accounts.service import create_account
    from solarapi.auth.service import create_key
    from solarapi.kit.ids import new_id
    from solarapi.models.systems import System
    from solarapi.readings.upload import store_series

    maker = app.state.sessionmaker  # type: ignore[attr-defined]
    async with maker() as session, session.begin():
        owner = await create_account(
            session, name="Bench fleet", email=f"bench-{uuid.uuid4().hex[:8]}@example.com",
            password="bench password 123", plan=Plan.ENTERPRISE, now=utcnow(),
        )  # fmt: skip
        _, key = await create_key(
            session, account_id=owner.account.id, name="bench", environment=Environment.LIVE,
            secret=app.state.settings.effective_secret_key, now=utcnow(),  # type: ignore[attr-defined]
        )  # fmt: skip
    starts = np.arange(
        int(START.timestamp()), int((START + timedelta(days=days)).timestamp()), 900, np.int64
    )
    hours = (starts % 86400) / 3600
    shape = np.clip(np.sin((hours - 4) / 16 * np.pi), 0, None)
    ids = []
    began = time.perf_counter()
    for number in range(systems):
        async with maker() as session, session.begin():
            now = utcnow()
            system = System(
                id=new_id("sys"), account_id=owner.account.id, environment="live",
                name=f"Bench {number}", status="active", data_source="metered",
                capacity_kwp=10.0, latitude=52.0, longitude=5.0, timezone="Europe/Amsterdam",
                tilt_deg=30.0, azimuth_deg=180.0, market_zone="NL", created_at=now,
                updated_at=now,
            )  # fmt: skip
            session.add(system)
            await session.flush()
            energy = np.round(2000.0 * shape * (0.5 + (number % 7) / 14), 1)
            for lo in range(0, len(starts), 10_000):
                part = slice(lo, lo + 10_000)
                await store_series(session, system, starts[part], energy[part], energy[part] * 4)
            ids.append(system.id)
    rows = systems * len(starts)
    print(f"built {systems} systems × {days} days = {rows:,} quarter-hours "
          f"in {time.perf_counter() - began:.1f} s")  # fmt: skip
    return key.key, ids


async def touch(client: httpx.AsyncClient, system_id: str, round_: int) -> None:
    """One write, so no kept body serves the next round (both sides uncached)."""
    stamp = (START - timedelta(days=1, minutes=15 * round_)).strftime("%Y-%m-%dT%H:%M:%SZ")
    response = await client.post(
        f"/api/v1/systems/{system_id}/readings",
        json={"readings": [{"timestamp": stamp, "energy_wh": 1.0}]},
    )
    assert response.status_code == 200, response.text


async def measure(settings: Settings, systems: int, days: int, rounds: int) -> None:
    from solarapi.app import create_app

    app = create_app(settings, run_jobs=False)
    async with app.router.lifespan_context(app):
        key, ids = await build(app, systems, days)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench",
            headers={"Authorization": f"Bearer {key}"}, timeout=600,
        ) as client:  # fmt: skip
            window = {
                "from": START.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "to": (START + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "interval": "1d",
            }
            fleet_cpu, single_cpu, latencies = [], [], []
            for round_ in range(rounds):
                await touch(client, ids[0], round_)
                cpu, wall = time.process_time(), time.perf_counter()
                page, total = 1, 0
                while True:
                    response = await client.get(
                        "/api/v1/portfolio/readings", params={**window, "limit": 1000, "page": page}
                    )
                    assert response.status_code == 200, response.text
                    body = response.json()
                    total += len(body["data"])
                    if not body["pagination"]["has_more"]:
                        break
                    page += 1
                latencies.append(time.perf_counter() - wall)
                fleet_cpu.append(time.process_time() - cpu)
                assert total == systems
                await touch(client, ids[0], rounds + round_)
                cpu = time.process_time()
                for system_id in ids:
                    response = await client.get(
                        f"/api/v1/systems/{system_id}/readings", params=window
                    )
                    assert response.status_code == 200
                single_cpu.append(time.process_time() - cpu)
            latencies.sort()
            p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
            print(f"portfolio 1d × {days} days, {systems} systems: median "
                  f"{statistics.median(latencies) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; "
                  f"CPU {statistics.median(fleet_cpu):.3f} s vs {statistics.median(single_cpu):.3f} s "
                  f"for {systems} per-system requests = "
                  f"{statistics.median(single_cpu) / statistics.median(fleet_cpu):.1f}× fewer")  # fmt: skip

            ndjson = {"Accept": "application/x-ndjson"}
            cpu, wall = time.process_time(), time.perf_counter()
            streamed, requests, cursor = 0, 0, None
            while True:
                params = (
                    {"limit": 100_000} if cursor is None else {"limit": 100_000, "cursor": cursor}
                )
                response = await client.get(
                    "/api/v1/readings/changes", params=params, headers=ndjson
                )
                assert response.status_code == 200, response.text
                lines = response.content.splitlines()
                tail = httpx.Response(200, content=lines[-1]).json()
                streamed += len(lines) - 1
                requests += 1
                cursor = tail["next_cursor"]
                if not tail["has_more"]:
                    break
            elapsed = time.perf_counter() - wall
            print(f"change feed NDJSON: {streamed:,} rows in {requests} requests, "
                  f"{streamed / elapsed:,.0f} rows/s wall, "
                  f"{streamed / (time.process_time() - cpu):,.0f} rows per CPU-second")  # fmt: skip
            per_day = systems * 96
            print(f"one day of this fleet = {per_day:,} rows = "
                  f"{-(-per_day // 100_000)} NDJSON request(s) (limit 100,000)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", help="postgresql://… of an empty database")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="bench-portfolio-"))
    options = {"data_dir": data_dir, "secret_key": SECRET, "job_runner": "external",
               "rate_limit_scale": 1000}  # fmt: skip
    if args.postgres:
        options["database_url"] = args.postgres
    settings = Settings(**options)  # type: ignore[arg-type]
    upgrade(settings)
    print(f"database: {'PostgreSQL' if args.postgres else 'SQLite'}")
    asyncio.run(measure(settings, args.systems, args.days, args.rounds))


if __name__ == "__main__":
    main()
