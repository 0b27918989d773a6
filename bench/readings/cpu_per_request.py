"""Server CPU per request, beside req/s, for the readings read paths and their reference
requests — the figure that decides the throughput targets on a 2-core machine, steadier than
req/s when other work runs beside the benchmark.

    .venv/bin/python bench/readings/cpu_per_request.py [--backend sqlite|postgres]
        [--dataset one|many] [--seconds 5] [--rounds 2] [--env NAME=VALUE ...]

Uses the datasets of `bench_readings.py` (built there if missing), starts one
`solarapi serve`, and for each case runs `wrk -t1 -c16` while reading the server's CPU time
(user + system, all its threads) from /proc/<pid>/stat. Cases: `GET /health`,
`GET /systems/{id}` (authentication, plan check and one system lookup: the floor of every
readings request), 1 day of `1h` and 1 year of `1d`. `--rounds` repeats the whole set and
prints each round, so drift on a shared machine shows.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_readings import (
    USES_PER_KEY,
    make_keys,
    prepare,
    query_string,
    system_ids,
    throughput,
)

from harness import server_process
from solarapi.kit.plans import Plan

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (all threads)


def postgres_cpu_seconds() -> float:
    """CPU of every process named postgres on this machine (the local server's backends;
    those that exited meanwhile are not counted, so keep the pool warm)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    total += cpu_seconds(int(entry.name))
            except OSError:
                continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dataset", choices=("one", "many"), default="one")
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    args = parser.parse_args()

    settings, env = prepare(args.backend, args.dataset, args.systems, rebuild=False)
    env.update(item.split("=", 1) for item in args.env)
    target = (ids := asyncio.run(system_ids(settings)))[len(ids) // 2]
    # Keys for up to 4,000 req/s (each used at most USES_PER_KEY times): a case that runs out
    # measures 429s.
    per_case = math.ceil(4000 * args.seconds / USES_PER_KEY)
    cases: dict[str, str] = {
        "GET /health": "/api/v1/health",
        "GET /systems/{id}": f"/api/v1/systems/{target}",
    }
    for case in ("1 day of 1h", "1 year of 1d"):
        cases[case] = f"/api/v1/systems/{target}/readings?{query_string(case)}"
    keys = asyncio.run(make_keys(settings, Plan.PRO, per_case * (len(cases) - 1) * args.rounds))
    work = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    with server_process(env) as (base, server_pid):
        used = 0
        for round_no in range(args.rounds):
            print(f"{args.backend} {args.dataset} round {round_no + 1} {' '.join(args.env)}")
            health_rate = health_cpu = 0.0
            for case, path in cases.items():
                if case == "GET /health":
                    case_keys = keys[:1]
                else:
                    case_keys = keys[used : used + per_case]
                    used += per_case
                before, began = cpu_seconds(server_pid), time.perf_counter()
                pg_before = postgres_cpu_seconds() if args.backend == "postgres" else 0.0
                rate, status = throughput(
                    base, path, case_keys, args.seconds, work, args.connections
                )
                cpu = cpu_seconds(server_pid) - before
                count = rate * (time.perf_counter() - began)
                per_request = cpu / count * 1000
                database = ""
                if args.backend == "postgres":
                    pg_ms = (postgres_cpu_seconds() - pg_before) / count * 1000
                    database = f"   PostgreSQL CPU {pg_ms:5.2f} ms/request"
                if case == "GET /health":
                    health_rate, health_cpu = rate, per_request
                print(f"  {case:18} {rate:7.0f} req/s {rate / health_rate:5.0%}   "
                      f"CPU {per_request:5.2f} ms/request {health_cpu / per_request:5.0%}"
                      f"{database}   ({status})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
