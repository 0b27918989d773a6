"""Benchmark: simulated sandbox readings through HTTP against a real `solarapi serve` (one
uvicorn worker), cold and warm model cache, on SQLite and on PostgreSQL; plus the model alone.

    .venv/bin/python bench/sandbox/bench_sandbox.py [--backend sqlite|postgres|both]
        [--cold 5] [--runs 40]

Over HTTP, with an Enterprise sandbox key (`pk_test_`):
  - cold: the first request for a system the server has never simulated (each cold sample is
    a new sandbox system, created through the API, so nothing is cached for it);
  - warm: the same request again, `--runs` times (median and p95), with
    `Accept-Encoding: gzip` (what browsers and httpx send) and once more without.
Queries: one year of `1d` buckets (2025, the system's local calendar: 13 UTC months of
quarter-hours simulated) and one month of `15m` buckets (June 2025, 2,880 buckets).

In-process, for reference: `sandbox.model.simulate` for a year (cold / warm cache) and
`sandbox.prices.simulate_prices` for a zone-year.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx

from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.migrate import upgrade

SECRET = "bench-secret-key-that-is-long-enough-0123456789"
PG_ADMIN = os.environ.get("SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
QUERIES = {
    "1 year of 1d": {
        "from": "2025-01-01T00:00:00+01:00", "to": "2026-01-01T00:00:00+01:00", "interval": "1d"
    },
    "1 month of 15m": {
        "from": "2025-06-01T00:00:00+02:00", "to": "2025-07-01T00:00:00+02:00", "interval": "15m"
    },
}  # fmt: skip
TARGET_WARM_MS = 30.0


async def make_key(settings: Settings) -> str:
    from solarapi.accounts.service import create_account
    from solarapi.auth.service import create_key
    from solarapi.db import create_oneshot_engine, sessionmaker_for

    engine = create_oneshot_engine(settings)
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            created = await create_account(
                session,
                name="bench sandbox",
                email=f"bench-{uuid.uuid4().hex[:10]}@example.com",
                password="bench password 123",
                plan=Plan.ENTERPRISE,
                now=utcnow(),
            )
            _, new = await create_key(
                session,
                account_id=created.account.id,
                name="bench",
                environment=Environment.TEST,
                secret=SECRET.encode(),
                now=utcnow(),
            )
            return new.key
    finally:
        await engine.dispose()


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/api/v1/health", timeout=1)
            return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def new_system(client: httpx.Client, n: int) -> str:
    response = client.post(
        "/api/v1/systems",
        json={
            "name": f"bench roof {n}",
            "capacity_kwp": 8.0,
            "inverter_capacity_kw": 7.0,
            "location": {"latitude": 52.09, "longitude": 5.12, "timezone": "Europe/Amsterdam"},
            "orientation": {"tilt_deg": 35.0, "azimuth_deg": 180.0},
        },
    )
    response.raise_for_status()
    system_id: str = response.json()["id"]
    return system_id


def timed_get(
    client: httpx.Client,
    path: str,
    params: dict[str, str],
    headers: dict[str, str] | None = None,
) -> float:
    start = time.perf_counter()
    response = client.get(path, params=params, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return elapsed


def bench_http(backend: str, cold: int, runs: int) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-sandbox-{backend}-"))
    env = {
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_SECRET_KEY": SECRET,
        "SOLARAPI_JOB_RUNNER": "external",
        "SOLARAPI_REDIS_URL": "",
    }
    db_name = f"bench_sandbox_{uuid.uuid4().hex[:8]}"
    if backend == "postgres":
        subprocess.run(["psql", PG_ADMIN, "-qc", f'CREATE DATABASE "{db_name}"'], check=True)
        env["SOLARAPI_DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{db_name}"
    settings = Settings(
        data_dir=data_dir, secret_key=SECRET, database_url=env.get("SOLARAPI_DATABASE_URL", "")
    )
    upgrade(settings)
    key = asyncio.run(make_key(settings))
    proc, base = start_server(env)
    try:
        headers = {"Authorization": f"Bearer {key}", "Accept-Encoding": "gzip"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            client.get("/api/v1/systems").raise_for_status()  # provisions the sandbox
            print(f"\n## {backend} (load average {os.getloadavg()[0]:.1f})")
            print(
                "| query | cold median (ms) | cold max | warm median | warm p95 "
                "| warm median, no gzip | target warm |"
            )
            print("|---|---|---|---|---|---|---|")
            for name, params in QUERIES.items():
                colds, warms, plain = [], [], []
                for n in range(cold):
                    path = f"/api/v1/systems/{new_system(client, n)}/readings"
                    colds.append(timed_get(client, path, params))
                    for _ in range(3):
                        timed_get(client, path, params)
                    warms.extend(timed_get(client, path, params) for _ in range(runs // cold))
                    plain.extend(
                        timed_get(client, path, params, {"Accept-Encoding": "identity"})
                        for _ in range(runs // cold)
                    )
                warms.sort()
                p95 = warms[int(0.95 * (len(warms) - 1))]
                print(
                    f"| {name} | {statistics.median(colds):.1f} | {max(colds):.1f} | "
                    f"{statistics.median(warms):.1f} | {p95:.1f} | "
                    f"{statistics.median(plain):.1f} | ≤ {TARGET_WARM_MS:.0f} |"
                )
    finally:
        proc.terminate()
        proc.wait(10)
        if backend == "postgres":
            subprocess.run(
                ["psql", PG_ADMIN, "-qc", f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'],
                check=False,
            )


def bench_model() -> None:
    from solarapi.sandbox import model, prices

    start, end = datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
    params = model.PvParams("sys_bench", 52.09, 5.12, "Europe/Amsterdam", 8.0, 7.0, 35.0, 180.0)
    model.simulate(params, start, datetime(2025, 1, 2, tzinfo=UTC))  # imports, Linke table
    colds, warms = [], []
    for _ in range(5):
        model.clear_cache()
        t0 = time.perf_counter()
        model.simulate(params, start, end)
        colds.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        model.simulate(params, start, end)
        warms.append((time.perf_counter() - t0) * 1000)
    climate_colds = []
    for _ in range(5):
        # A place's climatology (its reference site's normals against the model's clear sky)
        # is computed once per location and process.
        model._climatology.cache_clear()
        t0 = time.perf_counter()
        model._climatology(params.latitude, params.longitude)
        climate_colds.append((time.perf_counter() - t0) * 1000)
    price_colds = []
    for _ in range(5):
        prices.clear_cache()
        t0 = time.perf_counter()
        prices.simulate_prices("DE-LU", start, end)
        price_colds.append((time.perf_counter() - t0) * 1000)
    print("\n## model, in process (median of 5)")
    print("| what | cold (ms) | warm (ms) |")
    print("|---|---|---|")
    print(
        f"| simulate: 1 system-year (35,040 quarter-hours) | {statistics.median(colds):.1f} | "
        f"{statistics.median(warms):.2f} |"
    )
    print(
        f"| climatology of a new location (once per place and process) | "
        f"{statistics.median(climate_colds):.1f} | — |"
    )
    print(f"| simulate_prices: 1 zone-year | {statistics.median(price_colds):.1f} | — |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    bench_model()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        bench_http(backend, args.cold, args.runs)


if __name__ == "__main__":
    main()
