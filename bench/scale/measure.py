"""Measure the databases `build.py` made: sizes, latency against a 1-system database, and
throughput of one against two API workers.

    .venv/bin/python bench/scale/measure.py sizes   [--database solar_scale]
    .venv/bin/python bench/scale/measure.py latency [--big solar_scale] [--small solar_scale_one]
        [--runs 300]
    .venv/bin/python bench/scale/measure.py workers [--database solar_scale] [--seconds 10]
        [--rounds 3] [--connections 16]

- `sizes`: rows (exact `count(*)`), heap, index and total bytes of `readings` and its rollups
  (`pg_relation_size`, `pg_indexes_size`, `pg_total_relation_size`), and bytes per row.
- `latency`: one `solarapi serve` on each database; the three queries of `bench/readings`
  (1 year of `1d`, 1 month of `15m`, 1 day of `1h`, all in 2024) sent to the two servers in
  turn, request by request, so the machine's drift falls on both alike; medians and big/small
  per query. Target: within 20 %. `--spread`: the big database's request i goes to its
  system i (300 different systems, their pages not necessarily in memory).
- `workers`: `solarapi serve --workers 1` and `--workers 2`, both on PostgreSQL + Redis
  (`SOLARAPI_REDIS_URL`, default redis://127.0.0.1:6379/9), `wrk -t1` from 127.0.0.1 on the
  1-day `1h` request, alternating in rounds. Beside req/s it reports the CPU seconds per
  request of the servers (all their processes), of the database's PostgreSQL backends, of
  Redis, and of wrk itself, and how busy the whole machine was (other work included): on two
  cores the load generator's share is part of the result.

Every measured response must be a 200: each Pro key (60 per minute) is used at most 50 times.
On a shared machine, run the throughput part when nothing else is benchmarking.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "readings"))
sys.path.insert(0, str(Path(__file__).parent))

from bench_readings import QUERIES, USES_PER_KEY, WRK_SCRIPT, make_keys, query_string, system_ids
from build import database_url, psql

from harness import SECRET, TICK, cpu_seconds, free_port, process_tree, serving, wait_for
from solarapi.config import Settings

TABLES = ("readings", "reading_hours", "reading_days")


def settings_for(name: str) -> tuple[Settings, dict[str, str]]:
    data_dir = Path(tempfile.gettempdir()) / f"bench-scale-{name}"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {"SOLARAPI_DATA_DIR": str(data_dir), "SOLARAPI_SECRET_KEY": SECRET,
           "SOLARAPI_JOB_RUNNER": "external", "SOLARAPI_LOG_LEVEL": "WARNING",
           "SOLARAPI_DATABASE_URL": database_url(name)}  # fmt: skip
    settings = Settings(data_dir=data_dir, secret_key=SECRET, database_url=database_url(name))
    return settings, env


# --- sizes -------------------------------------------------------------------------------------


def sizes(database: str) -> None:
    url = database_url(database)
    systems = psql(url, "SELECT count(*) FROM systems WHERE name LIKE 'Bench scale %'")
    print(f"{database}: {systems} bench systems; database {psql(url, 'SELECT pg_size_pretty(pg_database_size(current_database()))')}")  # fmt: skip
    print(f"{'table':14} {'rows':>12} {'heap':>10} {'indexes':>10} {'total':>10} "
          f"{'B/row heap':>10} {'B/row total':>11}")  # fmt: skip
    for table in TABLES:
        rows = int(psql(url, f"SELECT count(*) FROM {table}"))  # noqa: S608 - fixed names
        heap, index, total = (
            int(value)
            for value in psql(
                url,
                f"SELECT pg_relation_size('{table}'), pg_indexes_size('{table}'), "
                f"pg_total_relation_size('{table}')",
            ).split("|")
        )
        print(f"{table:14} {rows:>12,} {heap / 2**20:>8,.0f}MB {index / 2**20:>8,.0f}MB "
              f"{total / 2**20:>8,.0f}MB {heap / max(rows, 1):>10.1f} "
              f"{total / max(rows, 1):>11.1f}")  # fmt: skip


# --- latency -----------------------------------------------------------------------------------


def latency(big: str, small: str, runs: int, spread: bool) -> None:
    per_case = math.ceil((runs + 10) / USES_PER_KEY)
    clients: dict[str, list[httpx.Client]] = {}
    targets: dict[str, list[str]] = {}
    with contextlib.ExitStack() as stack:
        for label, name in (("small", small), ("big", big)):
            settings, env = settings_for(name)
            ids = asyncio.run(system_ids(settings))
            # --spread: the big database's request i goes to system i (a different system's
            # pages every time, as when many clients poll); otherwise its middle system.
            targets[label] = ids if spread and label == "big" else [ids[len(ids) // 2]]
            keys = asyncio.run(make_keys(settings, _pro(), len(QUERIES) * per_case))
            base = stack.enter_context(serving(env))
            clients[label] = [
                stack.enter_context(
                    httpx.Client(
                        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
                    )
                )
                for key in keys
            ]
        print(f"medians of {runs} requests, alternating: big = {big} ({len(ids)} systems), "
              f"small = {small}{'; big spread over all its systems' if spread else ''}", flush=True)  # fmt: skip
        for n, (case, params) in enumerate(QUERIES.items()):
            times: dict[str, list[float]] = {"small": [], "big": []}
            for i in range(runs + 10):
                for label in ("small", "big") if i % 2 else ("big", "small"):
                    client = clients[label][n * per_case + i // USES_PER_KEY]
                    began = time.perf_counter()
                    response = client.get(
                        f"/api/v1/systems/{targets[label][i % len(targets[label])]}/readings",
                        params=params,
                    )
                    elapsed = (time.perf_counter() - began) * 1000
                    if response.status_code != 200:
                        raise RuntimeError(
                            f"{label} {case}: {response.status_code} {response.text}"
                        )
                    if i == 0:
                        totals = response.json()["meta"]["totals"]
                        if totals["samples"] < 0.99 * totals["expected_samples"]:
                            raise RuntimeError(f"{label} {case}: the data does not cover it")
                    if i >= 10:  # warm-up
                        times[label].append(elapsed)
            s, b = statistics.median(times["small"]), statistics.median(times["big"])
            print(f"  {case:16} small {s:6.2f} ms   big {b:6.2f} ms   big/small {b / s:5.2f}",
                  flush=True)  # fmt: skip


def _pro():  # type: ignore[no-untyped-def]
    from solarapi.kit.plans import Plan

    return Plan.PRO


# --- workers -----------------------------------------------------------------------------------


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / TICK, sum(fields) / TICK


@contextmanager
def server(env: dict[str, str], workers: int) -> Iterator[tuple[str, int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port), "--workers", str(workers)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(base)
        yield base, process.pid
    finally:
        process.terminate()
        process.wait(30)


def run_wrk(base: str, script: Path, seconds: int, connections: int) -> tuple[float, int, float]:
    """req/s, non-2xx responses, and wrk's own CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), base],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rate, int(bad.group(1)) if bad else 0, cpu


def backends(database: str) -> list[int]:
    sql = "SELECT pid FROM pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()"
    out = psql(database_url(database), sql % database)
    return [int(line) for line in out.split() if line]


def redis_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-x", "redis-server"], capture_output=True, text=True).stdout
    return [int(line) for line in out.split()]


UPLOAD_SCRIPT = """
local keys = {}
for line in io.lines("KEYS") do keys[#keys + 1] = line end
local systems = {}
for line in io.lines("SYSTEMS") do systems[#systems + 1] = line end
local n = 0
request = function()
  n = n + 1
  local system = systems[(n % #systems) + 1]
  local t0 = BASE + math.floor(n / #systems) * 3600
  local items = {}
  for q = 0, 3 do
    items[#items + 1] = string.format('{"timestamp":"%s","energy_wh":500.0,"power_w":2000.0}',
      os.date("!%Y-%m-%dT%H:%M:%SZ", t0 + q * 900))
  end
  return wrk.format("POST", "/api/v1/systems/" .. system .. "/readings",
    {["Authorization"] = "Bearer " .. keys[(n % #keys) + 1],
     ["Content-Type"] = "application/json"},
    '{"readings":[' .. table.concat(items, ",") .. ']}')
end
"""
UPLOAD_SYSTEMS = 500
# 2019-01-01 UTC; run r writes hours [r * 1000, r * 1000 + requests / UPLOAD_SYSTEMS) of each
# system, so every upload is of new quarter-hours (the usual case) and runs never overlap.
UPLOAD_BASE = 1_546_300_800


async def upload_systems(settings: Settings, count: int) -> tuple[list[str], list[str]]:
    """An Enterprise account with `count` fresh systems (named `Ingest …`, not `Bench …`) and
    keys enough for the runs; returns (system ids, keys)."""
    from harness import make_account
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.ids import new_id
    from solarapi.kit.timefmt import utcnow
    from solarapi.models.systems import System

    account_id, keys = await make_account(settings, 1_000)
    engine = create_oneshot_engine(settings)
    ids = [new_id("sys") for _ in range(count)]
    async with sessionmaker_for(engine)() as session, session.begin():
        now = utcnow()
        for number, system_id in enumerate(ids):
            session.add(
                System(
                    id=system_id,
                    account_id=account_id,
                    environment="live",
                    name=f"Ingest {number}",
                    status="active",
                    data_source="metered",
                    capacity_kwp=10.0,
                    latitude=52.0,
                    longitude=5.0,
                    timezone="Europe/Amsterdam",
                    tilt_deg=30.0,
                    azimuth_deg=180.0,
                    created_at=now,
                    updated_at=now,
                )
            )
    await engine.dispose()
    return ids, keys


def workers(
    database: str, redis_url: str, seconds: int, rounds: int, connections: int, case: str
) -> None:
    settings, env = settings_for(database)
    env["SOLARAPI_REDIS_URL"] = redis_url
    work = Path(tempfile.mkdtemp(prefix="bench-scale-wrk-"))
    ids = asyncio.run(system_ids(settings))
    if case == "read":
        per_run = math.ceil(1_500 * seconds / USES_PER_KEY)  # room for 1,500 req/s
        keys = asyncio.run(make_keys(settings, _pro(), per_run * (rounds * 2 + 1)))
        path = f"/api/v1/systems/{ids[len(ids) // 2]}/readings?{query_string('1 day of 1h')}"

        def script(run: int) -> Path:
            keys_file = work / f"keys-{run}.txt"
            keys_file.write_text("\n".join(keys[run * per_run : (run + 1) * per_run]) + "\n")
            file = work / f"read-{run}.lua"
            file.write_text(WRK_SCRIPT % (keys_file, path))
            return file

        title = f"GET 1 day of 1h on {database} ({len(ids)} bench systems)"
    else:
        systems, keys = asyncio.run(upload_systems(settings, UPLOAD_SYSTEMS))
        per_run = len(keys) // (rounds * 2 + 1)  # Enterprise: 300 per minute and key
        (work / "systems.txt").write_text("\n".join(systems) + "\n")

        def script(run: int) -> Path:
            keys_file = work / f"keys-{run}.txt"
            keys_file.write_text("\n".join(keys[run * per_run : (run + 1) * per_run]) + "\n")
            file = work / f"upload-{run}.lua"
            file.write_text(
                UPLOAD_SCRIPT.replace("KEYS", str(keys_file))
                .replace("SYSTEMS", str(work / "systems.txt"))
                .replace("BASE", str(UPLOAD_BASE + run * 1000 * 3600))
            )
            return file

        title = (f"POST 4 new quarter-hours to one of {UPLOAD_SYSTEMS} systems (an hour of a "
                 f"meter) on {database}")  # fmt: skip
    results: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    print(f"{title}; wrk -t1 -c{connections} -d{seconds}s; PostgreSQL + Redis ({redis_url})",
          flush=True)  # fmt: skip
    with server(env, 1) as (one, one_pid), server(env, 2) as (two, two_pid):
        run = 0
        for base in (one, two):  # warm: connections, prepared statements, imports
            run_wrk(base, script(run), 2, connections)
        for round_no in range(rounds):
            for count, base, pid in ((1, one, one_pid), (2, two, two_pid))[:: 1 - 2 * (round_no % 2)]:  # fmt: skip
                run += 1
                lua = script(run)
                server_pids, pg_pids, redis = process_tree(pid), backends(database), redis_pids()
                s0, p0, r0 = cpu_seconds(server_pids), cpu_seconds(pg_pids), cpu_seconds(redis)
                m0 = machine_busy()
                rate, bad, wrk_cpu = run_wrk(base, lua, seconds, connections)
                m1 = machine_busy()
                pg_pids = sorted(set(pg_pids) | set(backends(database)))
                s1, p1, r1 = (
                    cpu_seconds(process_tree(pid)),
                    cpu_seconds(pg_pids),
                    cpu_seconds(redis),
                )
                n = rate * seconds
                row = {
                    "rate": rate, "server": (s1 - s0) / n * 1e3, "pg": (p1 - p0) / n * 1e3,
                    "redis": (r1 - r0) / n * 1e3, "wrk": wrk_cpu / n * 1e3,
                    "busy": (m1[0] - m0[0]) / (m1[1] - m0[1]),
                }  # fmt: skip
                results[count].append(row)
                print(f"  round {round_no + 1} workers={count}: {rate:7.0f} req/s"
                      f"{'' if not bad else f' ({bad} non-2xx!)'}; CPU ms/request: server "
                      f"{row['server']:.2f}, PostgreSQL {row['pg']:.2f}, Redis {row['redis']:.2f}, "
                      f"wrk {row['wrk']:.2f}; machine {row['busy']:.0%} busy", flush=True)  # fmt: skip
    for count, rows in results.items():
        med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"workers={count} median: {med['rate']:.0f} req/s; CPU ms/request server "
              f"{med['server']:.2f} + PostgreSQL {med['pg']:.2f} + Redis {med['redis']:.2f} + "
              f"wrk {med['wrk']:.2f}; machine {med['busy']:.0%} busy", flush=True)  # fmt: skip
    ratio = statistics.median(
        two["rate"] / one["rate"] for one, two in zip(results[1], results[2], strict=True)
    )
    print(f"2 workers / 1 worker (median of the rounds' ratios): {ratio:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sizes")
    p.add_argument("--database", default="solar_scale")
    p = sub.add_parser("latency")
    p.add_argument("--big", default="solar_scale")
    p.add_argument("--small", default="solar_scale_one")
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--spread", action="store_true", help="big: a different system per request")
    p = sub.add_parser("workers")
    p.add_argument("--database", default="solar_scale")
    p.add_argument(
        "--redis", default=os.environ.get("SOLARAPI_REDIS_URL", "redis://127.0.0.1:6379/9")
    )
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--case", choices=("read", "upload"), default="read")
    args = parser.parse_args()
    if args.command == "sizes":
        sizes(args.database)
    elif args.command == "latency":
        latency(args.big, args.small, args.runs, args.spread)
    else:
        workers(args.database, args.redis, args.seconds, args.rounds, args.connections, args.case)


if __name__ == "__main__":
    main()
