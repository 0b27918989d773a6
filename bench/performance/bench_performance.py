"""Benchmark: `GET /systems/{id}/performance` for one system-year at `1M`, through HTTP
against a real single-worker `solarapi serve`, on SQLite (and PostgreSQL with --backend).

    .venv/bin/python bench/performance/bench_performance.py [--backend sqlite|postgres|both]
        [--systems 3] [--runs 30]

Each system holds a year (2025) of metered readings and sensor irradiance (a sine day).
- cold: the first request for a system: its readings and irradiance are read, the site's
  geometry (sun position, clear and typical sky, ~35,000 quarter-hours) is modelled on a
  worker thread, bucketed and rendered. pvlib is imported before (by a request for another
  system), so this is the modelling, not the process's start-up. One sample per system.
- warm: the same request again, `--runs` times: the body is kept while the database is
  unchanged (median, p95).
- after another system's commit: another system's PATCH before each request. The body is
  kept per system (`systems.data_version`), so this is a warm request too.
- after its own data changed: one quarter-hour of the system's irradiance uploaded again
  before each request, so the body is read and bucketed afresh while the geometry stays
  cached (what every request cost before the body was kept per system, when any commit
  anywhere dropped it).
Beside each wall-clock figure: the server process's CPU (user + system, all its threads, from
/proc/<pid>/stat, 10 ms ticks) over the same requests, and the machine's load average — on a
shared machine the CPU is the figure that holds, the wall clock is CPU × contention.
Targets (issue 30): warm ≤ 150 ms, cold ≤ 1.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import fresh_database, make_account, server_process, upload_a_year

START = datetime(2024, 12, 31, 23, tzinfo=UTC)
END = datetime(2025, 12, 31, 23, tzinfo=UTC)
TICKS = os.sysconf("SC_CLK_TCK")
YEAR = {"from": "2025-01-01T00:00:00+01:00", "to": "2026-01-01T00:00:00+01:00", "interval": "1M"}


def upload_irradiance(client: httpx.Client, system_id: str) -> None:
    batch: list[dict[str, object]] = []
    end_s = int(END.timestamp())
    for t in range(int(START.timestamp()), end_s, 900):
        hour = (t % 86400) / 3600
        poa = max(0.0, 900 * math.sin((hour - 4) / 16 * math.pi)) if 4 <= hour <= 20 else 0.0
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        batch.append({"timestamp": stamp, "poa_w_m2": round(poa, 1), "ambient_temp_c": 15.0})
        if len(batch) == 10_000 or t + 900 >= end_s:
            client.post(
                f"/api/v1/systems/{system_id}/irradiance", json={"readings": batch}
            ).raise_for_status()
            batch = []


def timed(client: httpx.Client, system_id: str) -> float:
    started = time.perf_counter()
    response = client.get(f"/api/v1/systems/{system_id}/performance", params=YEAR)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    assert len(response.json()["data"]) == 12
    return elapsed * 1000


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (all threads)


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def run(backend: str, systems: int, runs: int) -> None:
    with fresh_database("performance", backend) as db:
        _, (key,) = asyncio.run(make_account(db.settings, 1))
        with (
            server_process(db.env) as (base, pid),
            httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as client,
        ):
            ids = []
            for i in range(systems + 1):
                body = {
                    "name": f"bench {i}", "capacity_kwp": 8.4, "inverter_capacity_kw": 7.0,
                    "location": {"latitude": 50.0 + i * 0.7, "longitude": 4.0 + i * 0.9,
                                 "timezone": "Europe/Amsterdam"},
                }  # fmt: skip
                system_id = client.post("/api/v1/systems", json=body).json()["id"]
                if i > 0:
                    upload_a_year(client, system_id, START, END)
                    upload_irradiance(client, system_id)
                ids.append(system_id)
            # Import pvlib in the server (a day of the spare system), outside the figures.
            client.get(f"/api/v1/systems/{ids[0]}/performance").raise_for_status()
            cold, cold_cpu = [], []
            for system_id in ids[1:]:
                before = cpu_seconds(pid)
                cold.append(timed(client, system_id))
                cold_cpu.append((cpu_seconds(pid) - before) * 1000)
            cold_load = load()
            before = cpu_seconds(pid)
            warm = [timed(client, ids[1]) for _ in range(runs)]
            warm_cpu = (cpu_seconds(pid) - before) * 1000 / runs
            after_commit, commit_cpu = [], 0.0
            for i in range(runs):
                client.patch(f"/api/v1/systems/{ids[0]}", json={"name": f"spare {i}"})
                before = cpu_seconds(pid)
                after_commit.append(timed(client, ids[1]))
                commit_cpu += (cpu_seconds(pid) - before) * 1000
            commit_cpu /= runs
            after_own, own_cpu = [], 0.0
            one = {"timestamp": "2025-06-15T10:00:00Z", "ambient_temp_c": 15.0}
            for i in range(runs):
                client.post(
                    f"/api/v1/systems/{ids[1]}/irradiance",
                    json={"readings": [{**one, "poa_w_m2": 700.0 + i}]},
                ).raise_for_status()
                before = cpu_seconds(pid)
                after_own.append(timed(client, ids[1]))
                own_cpu += (cpu_seconds(pid) - before) * 1000
            own_cpu /= runs
            end_load = load()
    print(f"{backend}: one system-year at 1M, single worker")
    print(
        f"  cold   {', '.join(f'{ms:.0f}' for ms in cold)} ms (target ≤ 1,500); server CPU "
        f"{', '.join(f'{ms:.0f}' for ms in cold_cpu)} ms; load average {cold_load}"
    )
    for label, values, cpu in (
        ("warm", warm, warm_cpu),
        ("after another system's commit", after_commit, commit_cpu),
        ("after its own data changed", after_own, own_cpu),
    ):
        ordered = sorted(values)
        p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
        print(
            f"  {label:<31} median {statistics.median(values):.1f} ms, p95 {p95:.1f} ms "
            f"(target ≤ 150); server CPU {cpu:.1f} ms a request (mean)"
        )
    print(f"  load average at the end {end_load}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--systems", type=int, default=3)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        run(backend, args.systems, args.runs)


if __name__ == "__main__":
    main()
