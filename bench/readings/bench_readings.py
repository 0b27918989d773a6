"""Benchmark: readings queries and uploads through HTTP against a real `solarapi serve`
(one uvicorn worker), on SQLite and on PostgreSQL.

    .venv/bin/python bench/readings/bench_readings.py [--backend sqlite|postgres|both]
        [--systems 200] [--runs 200] [--seconds 8] [--rebuild]

Datasets (built once, not timed, kept for re-runs under /tmp/bench-readings and in the
PostgreSQL databases bench_readings_<dataset>; `--rebuild` starts over):
  - `one`:  1 system × 2 years of 15-minute readings (70,080 rows).
  - `many`: N systems × 1 year (200 → 7,008,000 rows).
Rows are generated with a cheap synthetic day curve and written straight through
`readings.upload.store_series` (the bulk upsert plus the hourly and local-daily rollups the
API keeps on every upload) in chunks of 10,000 — no HTTP.

Measured, per backend and dataset, with a Pro key:
  - latency: median and p95 of `--runs` sequential requests (httpx, keep-alive) for
    1 year of `1d`, 1 month of `15m`, 1 day of `1h`, and GET /health for reference;
  - throughput: `wrk` (1 thread, 16 connections, `--seconds`) on /health, the 1-day `1h` and
    the 1-year `1d` requests, each key used at most 50 times (Pro: 60 per minute) so no 429
    is ever measured;
  - upload (dataset `one` only): 20 batches of 10,000 readings over HTTP with an Enterprise key,
    bodies serialised before timing, rollups included.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).parent.parent))

from harness import PG_ADMIN, SECRET, serving
from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.migrate import upgrade

ROOT = Path(tempfile.gettempdir()) / "bench-readings"
START = datetime(2024, 1, 1, tzinfo=UTC)
TZ = "Europe/Amsterdam"
# In 2024, which both datasets cover (`many` holds 2024 only): the same query must find the
# same amount of data on both, or the comparison of their sizes means nothing.
QUERIES = {
    "1 year of 1d": {
        "from": "2024-01-01T00:00:00+01:00", "to": "2025-01-01T00:00:00+01:00", "interval": "1d"
    },
    "1 month of 15m": {
        "from": "2024-06-01T00:00:00+02:00", "to": "2024-07-01T00:00:00+02:00", "interval": "15m"
    },
    "1 day of 1h": {
        "from": "2024-06-15T00:00:00+02:00", "to": "2024-06-16T00:00:00+02:00", "interval": "1h"
    },
}  # fmt: skip
USES_PER_KEY = 50


def query_string(case: str) -> str:
    """The query of one of QUERIES, URL-encoded for wrk (which sends paths as given)."""
    return "&".join(f"{k}={v.replace('+', '%2B')}" for k, v in QUERIES[case].items())


def synthetic_day(starts: np.ndarray, capacity_kwp: float, seed: int) -> np.ndarray:
    hour = (starts % 86400) / 3600.0
    day = starts // 86400
    season = 0.6 + 0.4 * np.cos(2 * np.pi * ((day % 365) - 172) / 365)
    cloud = 0.3 + 0.7 * ((day * 2654435761 + seed) % 1000) / 1000
    shape = np.clip(np.sin((hour - 5) / 14 * np.pi), 0, None)
    result: np.ndarray = np.round(capacity_kwp * 250 * 0.8 * shape * season * cloud, 1)
    return result


async def build(settings: Settings, systems: int, years: int) -> None:
    from solarapi.accounts.service import create_account
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.ids import new_id
    from solarapi.models.systems import System
    from solarapi.readings.upload import store_series

    engine = create_oneshot_engine(settings)
    maker = sessionmaker_for(engine)
    async with maker() as session, session.begin():
        owner = await create_account(
            session, name="Bench data", email=f"bench-{uuid.uuid4().hex[:8]}@example.com",
            password="bench password 123", plan=Plan.PRO, now=utcnow(),
        )  # fmt: skip
    start_s = int(START.timestamp())
    end_s = int(START.replace(year=START.year + years).timestamp())
    starts = np.arange(start_s, end_s, 900, dtype=np.int64)
    began = time.perf_counter()
    for number in range(systems):
        async with maker() as session, session.begin():
            now = utcnow()
            system = System(
                id=new_id("sys"), account_id=owner.account.id, environment="live",
                name=f"Bench {number}", status="active", data_source="metered",
                capacity_kwp=10.0, latitude=52.0, longitude=5.0, timezone=TZ, tilt_deg=30.0,
                azimuth_deg=180.0, created_at=now, updated_at=now,
            )  # fmt: skip
            session.add(system)
            await session.flush()
            energy = synthetic_day(starts, 10.0, number)
            power = energy * 4
            for lo in range(0, len(starts), 10_000):
                await store_series(
                    session, system, starts[lo : lo + 10_000], energy[lo : lo + 10_000],
                    power[lo : lo + 10_000],
                )  # fmt: skip
        if number % 10 == 9 or number == systems - 1:
            rate = (number + 1) * len(starts) / (time.perf_counter() - began)
            print(f"  built {number + 1}/{systems} systems ({rate:,.0f} rows/s)", flush=True)
    await engine.dispose()


async def make_keys(settings: Settings, plan: Plan, count: int) -> list[str]:
    from solarapi.accounts.service import create_account
    from solarapi.auth.service import create_key
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.models.systems import System

    engine = create_oneshot_engine(settings)
    keys: list[str] = []
    async with sessionmaker_for(engine)() as session, session.begin():
        from sqlalchemy import select

        # Pro keys go on the account owning the bench systems, so they can read them.
        account_id = await session.scalar(
            select(System.account_id).where(System.name.like("Bench %")).limit(1)
        )
        if plan is Plan.ENTERPRISE or account_id is None:
            created = await create_account(
                session, name="Bench writer", email=f"bench-{uuid.uuid4().hex[:8]}@example.com",
                password="bench password 123", plan=plan, now=utcnow(),
            )  # fmt: skip
            account_id = created.account.id
        for i in range(count):
            _, key = await create_key(
                session, account_id=account_id, name=f"bench {i}", environment=Environment.LIVE,
                secret=settings.effective_secret_key, now=utcnow(),
            )  # fmt: skip
            keys.append(key.key)
    await engine.dispose()
    return keys


async def system_ids(settings: Settings) -> list[str]:
    from sqlalchemy import select

    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.models.systems import System

    engine = create_oneshot_engine(settings)
    async with sessionmaker_for(engine)() as session:
        ids = list(
            (
                await session.scalars(
                    select(System.id)
                    .where(System.name.like("Bench %"))
                    .order_by(System.created_at, System.id)
                )
            ).all()
        )
    await engine.dispose()
    return ids


def _psql(sql: str) -> str:
    return subprocess.run(
        ["psql", PG_ADMIN, "-tAqc", sql], check=True, capture_output=True, text=True
    ).stdout.strip()


def prepare(
    backend: str, dataset: str, systems: int, rebuild: bool
) -> tuple[Settings, dict[str, str]]:
    data_dir = ROOT / f"{backend}-{dataset}"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {"SOLARAPI_DATA_DIR": str(data_dir), "SOLARAPI_SECRET_KEY": SECRET,
           "SOLARAPI_JOB_RUNNER": "external", "SOLARAPI_LOG_LEVEL": "WARNING"}  # fmt: skip
    marker = data_dir / "built"
    if backend == "postgres":
        db_name = f"bench_readings_{dataset}"
        env["SOLARAPI_DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{db_name}"
        # db_name is built from a fixed choice (one/many), never user input.
        exists = _psql(f"SELECT 1 FROM pg_database WHERE datname = '{db_name}'") == "1"  # noqa: S608
        if rebuild or not exists or not marker.exists():
            _psql(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            _psql(f'CREATE DATABASE "{db_name}"')
            marker.unlink(missing_ok=True)
    elif rebuild or not marker.exists():
        for file in data_dir.glob("solar.db*"):
            file.unlink()
        marker.unlink(missing_ok=True)
    settings = Settings(
        data_dir=data_dir, secret_key=SECRET, database_url=env.get("SOLARAPI_DATABASE_URL", "")
    )
    if not marker.exists():
        upgrade(settings)
        count, years = (1, 2) if dataset == "one" else (systems, 1)
        print(f"{backend} {dataset}: building {count} system(s) x {years} year(s)", flush=True)
        began = time.perf_counter()
        asyncio.run(build(settings, count, years))
        print(f"  built in {time.perf_counter() - began:.0f} s", flush=True)
        if backend == "postgres":
            subprocess.run(["psql", env["SOLARAPI_DATABASE_URL"], "-qc", "VACUUM ANALYZE"],
                           check=True)  # fmt: skip
        marker.write_text("ok")
    upgrade(settings)
    return settings, env


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * fraction) - 1)]


def latency(
    base: str, path: str, params: dict[str, str], keys: list[str], runs: int
) -> list[float]:
    times: list[float] = []
    clients = [
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        for key in keys
    ]
    try:
        for i in range(runs + 5):
            client = clients[i // USES_PER_KEY]
            began = time.perf_counter()
            response = client.get(path, params=params)
            _ = response.content
            elapsed = (time.perf_counter() - began) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
            totals = response.json().get("meta", {}).get("totals") if params else None
            if (
                i == 0
                and totals is not None
                and totals["samples"] < 0.99 * totals["expected_samples"]
            ):
                # A range without its data measures something else: fewer rows, smaller
                # bodies (the year starts an hour before the data, at local midnight).
                raise RuntimeError(f"{path} {params}: the dataset does not cover it: {totals}")
            if i >= 5:  # the first few warm caches and connections
                times.append(elapsed)
    finally:
        for client in clients:
            client.close()
    return times


WRK_SCRIPT = """
local keys = {}
for line in io.lines("%s") do keys[#keys + 1] = line end
local n = 0
request = function()
  n = n + 1
  local key = keys[(n %% #keys) + 1]
  return wrk.format("GET", "%s", {["Authorization"] = "Bearer " .. key})
end
"""


def throughput(
    base: str, path: str, keys: list[str], seconds: int, work: Path, connections: int = 16
) -> tuple[float, str]:
    keys_file = work / f"keys-{uuid.uuid4().hex[:6]}.txt"
    keys_file.write_text("\n".join(keys) + "\n")
    script = work / f"wrk-{uuid.uuid4().hex[:6]}.lua"
    script.write_text(WRK_SCRIPT % (keys_file, path))
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), base],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rate, (f"{bad.group(1)} non-2xx" if bad else "all 2xx")


def upload_rate(base: str, key: str) -> float:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        created = c.post(
            "/api/v1/systems",
            json={"name": "Upload bench", "capacity_kwp": 10.0,
                  "location": {"latitude": 52.0, "longitude": 5.0, "timezone": TZ}},
        )  # fmt: skip
        created.raise_for_status()
        system_id = created.json()["id"]
        start_s = int(datetime(2019, 1, 1, tzinfo=UTC).timestamp())
        bodies = []
        for batch in range(20):
            starts = start_s + 900 * np.arange(batch * 10_000, (batch + 1) * 10_000)
            energy = synthetic_day(starts, 10.0, batch)
            bodies.append(orjson.dumps({"readings": [
                {"timestamp": datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "energy_wh": float(e), "power_w": float(e) * 4}
                for t, e in zip(starts.tolist(), energy.tolist(), strict=True)
            ]}))  # fmt: skip
        path = f"/api/v1/systems/{system_id}/readings"
        headers = {"content-type": "application/json"}
        began = time.perf_counter()
        for body in bodies:
            c.post(path, content=body, headers=headers).raise_for_status()
        elapsed = time.perf_counter() - began
    return 200_000 / elapsed


def run(backend: str, dataset: str, args: argparse.Namespace) -> None:
    settings, env = prepare(backend, dataset, args.systems, args.rebuild)
    ids = asyncio.run(system_ids(settings))
    target = ids[len(ids) // 2]
    per_case = math.ceil((args.runs + 5) / USES_PER_KEY)
    wrk_keys = 1200 * args.seconds // USES_PER_KEY  # ≥ 1,200 requests/s without reusing a key
    pro = asyncio.run(
        make_keys(settings, Plan.PRO, per_case * len(QUERIES) + 2 * wrk_keys * args.rounds)
    )
    work = Path(tempfile.mkdtemp(prefix="bench-readings-wrk-"))
    with serving(env) as base:
        label = f"{backend:8} {dataset:4}"
        health = latency(base, "/api/v1/health", {}, pro[:per_case], args.runs)
        print(f"{label} {'GET /health':16} median {statistics.median(health):6.2f} ms  "
              f"p95 {percentile(health, 0.95):6.2f} ms", flush=True)  # fmt: skip
        for n, (case, params) in enumerate(QUERIES.items()):
            keys = pro[n * per_case : (n + 1) * per_case]
            times = latency(base, f"/api/v1/systems/{target}/readings", params, keys, args.runs)
            print(f"{label} {case:16} median {statistics.median(times):6.2f} ms  "
                  f"p95 {percentile(times, 0.95):6.2f} ms  (n={args.runs})", flush=True)  # fmt: skip
        rest = pro[per_case * len(QUERIES) :]
        # Rounds of (health, 1-day 1h, 1-year 1d), each case's ratio taken within its round:
        # on a shared virtual machine the speed of the whole machine drifts between minutes.
        ratios: dict[str, list[float]] = {"1 day of 1h": [], "1 year of 1d": []}
        for round_no in range(args.rounds):
            health_rate, _ = throughput(base, "/api/v1/health", rest[:1], args.seconds, work)
            for n, case in enumerate(ratios):
                params = QUERIES[case]
                query = query_string(case)
                first = (round_no * 2 + n) * wrk_keys
                rate, status = throughput(
                    base, f"/api/v1/systems/{target}/readings?{query}",
                    rest[first : first + wrk_keys], args.seconds, work,
                )  # fmt: skip
                ratios[case].append(rate / health_rate)
                print(f"{label} throughput {case:14} {rate:7.0f} req/s = "
                      f"{rate / health_rate:4.0%} of /health ({health_rate:.0f} req/s; {status})",
                      flush=True)  # fmt: skip
        for case, values in ratios.items():
            print(f"{label} throughput {case:14} median of {len(values)} rounds: "
                  f"{statistics.median(values):4.0%} of /health", flush=True)  # fmt: skip
        if dataset == "one":
            writer = asyncio.run(make_keys(settings, Plan.ENTERPRISE, 1))[0]
            print(f"{label} upload 20 x 10,000 readings: {upload_rate(base, writer):,.0f} "
                  "readings/s", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--dataset", choices=("one", "many", "both"), default="both")
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds")
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    datasets = ("one", "many") if args.dataset == "both" else (args.dataset,)
    for backend in backends:
        for dataset in datasets:
            run(backend, dataset, args)


if __name__ == "__main__":
    main()
