"""Partitioned `readings` against one ordinary table: the same fleet in two PostgreSQL
databases, measured alternately (issue 34: W1–W3 within 10 % of the unpartitioned figures).

    # the fleet, in monthly partitions (bench/portfolio/README.md):
    .venv/bin/python bench/portfolio/run.py --postgres parts_part --systems 1000 --days 365 \\
        --build-only --monthly
    # the same database with `readings` as one table (below, "--make-flat"), then both measured:
    .venv/bin/python bench/fleet/partitions.py --part parts_part --flat parts_flat --make-flat
    .venv/bin/python bench/fleet/partitions.py --part parts_part --flat parts_flat

1. **API**: one `solarapi serve` (one worker, `SOLARAPI_JOB_RUNNER=external`, so no periodic
   job runs — nor the partition job on the flat copy) per database, driven by `wrk -t1` with a
   Lua script of paths: W1 (the 24 h before one of the last day's quarter-hours at `15m`),
   W2 (24 h from an hour of the year at `1h`), W3 (30 local days at `1d`). Every request is
   another (system, window) pair of a pseudo-random walk over all of them (pair
   `(A·k + B) mod N`, A coprime to N); no pair repeats within the run, and both databases get
   the same pairs in a round. `--rounds` rounds of `--secs` seconds per workload and
   database, the order swapped every round, a write (a PATCH of a system's name to itself)
   before each measurement. Reported: median and range of req/s and of the worker's CPU per
   request (`/proc/<pid>/stat`), PostgreSQL backends' CPU per request, and the median of the
   per-round flat/partitioned ratios. The answers of both are compared first (bytes).
2. **Database**: the statement the API runs for W1 (the system and its quarter-hours,
   `PostgresReadingStore.system_and_rows`) over 24 h and over 30 days, for `--queries` random
   (system, window) pairs, on both databases alternately: `EXPLAIN (ANALYZE, BUFFERS)` (as a
   one-off statement: planned with its values) — planning and execution time, shared buffers
   touched, partitions scanned — and the same statement prepared once per connection and
   executed as the app's driver does (PostgreSQL chooses custom or generic plans), timed
   round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import httpx
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import PG_ADMIN, SECRET, cpu_seconds, process_tree, wait_for
from solarapi.readings.store import RAW
from solarapi.readings.store_postgres import _packed

SERVER = PG_ADMIN.rsplit("/", 1)[0]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def psql(db: str, sql: str) -> str:
    return subprocess.run(
        ["psql", f"{SERVER}/{db}", "-v", "ON_ERROR_STOP=1", "-tAqc", sql],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


# --- the flat copy -----------------------------------------------------------------------------


def make_flat(part: str, flat: str) -> None:
    """`flat`: a copy of `part` (CREATE DATABASE … TEMPLATE) whose `readings` is one table with
    the same columns, primary key and foreign key, its rows in the same physical order (each
    partition's in turn, in the order of their months, each as it lies on disk).
    `change_batches` stays partitioned in both: W1–W3 do not read it."""
    if psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{flat}'") == "1":  # noqa: S608
        print(f"{flat} exists: kept")
        return
    indexes = psql(part, "SELECT indexdef FROM pg_indexes WHERE tablename = 'readings'")
    if indexes.count("\n") != 0 or "(system_id, start_s)" not in indexes:
        raise SystemExit(f"readings has other indexes than its primary key: {indexes}")
    began = time.perf_counter()
    psql("postgres", f'CREATE DATABASE "{flat}" TEMPLATE "{part}"')
    print(f"copied {part} → {flat} in {time.perf_counter() - began:.0f} s (load {load()})")
    partitions = psql(flat, "SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON"
                      " c.oid = i.inhrelid WHERE i.inhparent = 'readings'::regclass"
                      " ORDER BY pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT',"
                      " (regexp_match(pg_get_expr(c.relpartbound, c.oid), '\\d+'))[1]::bigint"
                      " NULLS FIRST").split()  # fmt: skip
    copy = "; ".join(f"INSERT INTO readings_flat SELECT * FROM {name}" for name in partitions)  # noqa: S608
    began = time.perf_counter()
    psql(
        flat,
        f"""BEGIN;
SET LOCAL maintenance_work_mem = '512MB';
CREATE TABLE readings_flat (LIKE readings INCLUDING DEFAULTS);
{copy};
ALTER TABLE readings_flat ADD CONSTRAINT pk_readings_flat PRIMARY KEY (system_id, start_s);
DROP TABLE readings;
ALTER TABLE readings_flat RENAME TO readings;
ALTER INDEX pk_readings_flat RENAME TO pk_readings;
ALTER TABLE readings ADD CONSTRAINT fk_readings_system_id_systems FOREIGN KEY (system_id)
    REFERENCES systems(id) ON DELETE CASCADE;
COMMIT;""",
    )
    print(
        f"readings made one table ({len(partitions)} partitions copied in turn) in "
        f"{time.perf_counter() - began:.0f} s (load {load()})"
    )
    for db in (part, flat):
        began = time.perf_counter()
        psql(db, "VACUUM ANALYZE")
        print(f"VACUUM ANALYZE {db}: {time.perf_counter() - began:.0f} s")


# --- the fleet's requests ----------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Walk:
    """Pair k of a workload's N (system, window) pairs: (A·k + B) mod N, A coprime to N."""

    def __init__(self, systems: list[tuple[str, str]], windows: int, seed: int) -> None:
        self.systems, self.windows = systems, windows
        self.n = len(systems) * windows
        rng = random.Random(seed)
        self.a = rng.randrange(self.n // 3, self.n)
        while math.gcd(self.a, self.n) != 1:
            self.a += 1
        self.b = rng.randrange(self.n)

    def pair(self, k: int) -> tuple[str, str, int]:
        index = (self.a * k + self.b) % self.n
        system_id, zone = self.systems[index % len(self.systems)]
        return system_id, zone, index // len(self.systems)


def workloads(
    systems: list[tuple[str, str]], start: datetime, end: datetime
) -> dict[str, tuple[Walk, Any]]:
    days = (end - start).days

    def w1(system_id: str, zone: str, w: int) -> str:
        to = end - timedelta(seconds=900 * w)
        return f"/api/v1/systems/{system_id}/readings?from={iso(to - timedelta(days=1))}&to={iso(to)}&interval=15m"

    def w2(system_id: str, zone: str, w: int) -> str:
        frm = start + timedelta(hours=w)
        return f"/api/v1/systems/{system_id}/readings?from={iso(frm)}&to={iso(frm + timedelta(days=1))}&interval=1h"

    def w3(system_id: str, zone: str, w: int) -> str:
        first = start.astimezone(ZoneInfo(zone)).date() + timedelta(days=w + 1)
        frm = datetime.combine(first, datetime.min.time(), ZoneInfo(zone))
        to = datetime.combine(first + timedelta(days=30), datetime.min.time(), ZoneInfo(zone))
        return f"/api/v1/systems/{system_id}/readings?from={iso(frm)}&to={iso(to)}&interval=1d"

    return {
        "W1": (Walk(systems, 96, 1), w1),
        "W2": (Walk(systems, days * 24 - 24, 2), w2),
        "W3": (Walk(systems, days - 31, 3), w3),
    }


# --- servers and wrk -----------------------------------------------------------------------------


@contextmanager
def server(db: str, port: int, logs: Path) -> Iterator[int]:
    """`solarapi serve` (one worker) on `db`; yields its pid. Its log is printed if it fails."""
    log_path = logs / f"serve-{db}.log"
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-parts-{db}-"))
    env = {
        **os.environ,
        "SOLARAPI_DATABASE_URL": f"{SERVER}/{db}",
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_SECRET_KEY": SECRET,
        "SOLARAPI_JOB_RUNNER": "external",  # no periodic job (partitions) in this process
        "SOLARAPI_RATE_LIMIT_SCALE": "100000",
        "SOLARAPI_LOG_LEVEL": "WARNING",
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "solarapi", "serve", "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        try:
            wait_for(f"http://127.0.0.1:{port}", timeout=120)
        except Exception:
            print(log_path.read_text()[-5000:])
            raise
        yield process.pid
    except BaseException:
        print(f"--- {log_path} (last 5000 characters) ---\n{log_path.read_text()[-5000:]}")
        raise
    finally:
        process.terminate()
        process.wait(20)


LUA = """
paths = {%s}
counter = 0
request = function()
    counter = counter + 1
    if counter > #paths then counter = 1; wrapped = true end
    return wrk.format("GET", paths[counter], headers)
end
headers = {["Authorization"] = "Bearer %s", ["Accept-Encoding"] = "identity"}
done = function(summary, latency, requests)
    io.write(string.format("WRK %%d %%d\\n", summary.requests, summary.errors.status))
end
"""


def run_wrk(port: int, paths: list[str], key: str, secs: int, connections: int) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(LUA % (",".join(json.dumps(p) for p in paths), key))
    try:
        done = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{secs}s", "--latency", "-s", script.name,
             f"http://127.0.0.1:{port}"],
            check=False, capture_output=True, text=True,
        )  # fmt: skip
        out = done.stdout
        if done.returncode:
            raise SystemExit(f"wrk failed: {done.stdout}{done.stderr}")
    finally:
        os.unlink(script.name)
    requests, bad = map(int, re.search(r"WRK (\d+) (\d+)", out).groups())  # type: ignore[union-attr]
    if bad or requests > len(paths):
        raise SystemExit(
            f"wrk: {bad} non-2xx/3xx answers, {requests} requests of {len(paths)}\n{out}"
        )

    def ms(label: str) -> float:
        value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)\b", out).groups()  # type: ignore[union-attr]
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return {"requests": requests, "rps": rate, "p50": ms("50%"), "p99": ms("99%")}


def backends(db: str) -> list[int]:
    sql = f"SELECT pid FROM pg_stat_activity WHERE datname = '{db}'"  # noqa: S608
    out = psql("postgres", sql + " AND backend_type = 'client backend'")
    return [int(line) for line in out.split() if line]


def measure_api(args: argparse.Namespace, state: dict[str, Any], logs: Path) -> None:
    rows = psql(args.part, "SELECT id, timezone FROM systems ORDER BY id")
    systems = [tuple(line.split("|")) for line in rows.splitlines()]
    end = datetime.fromisoformat(state["end"])
    start = end - timedelta(days=state["days"])
    loads = {name: (walk, path) for name, (walk, path) in workloads(systems, start, end).items()
             if name in args.workloads}  # fmt: skip
    per_round = int(args.secs * 2000)  # more than a worker answers in --secs
    dbs = {"part": args.part, "flat": args.flat}
    headers = {"Authorization": f"Bearer {state['key']}", "Accept-Encoding": "identity"}
    with (
        server(args.part, args.port, logs) as part_pid,
        server(args.flat, args.port + 1, logs) as flat_pid,
    ):
        ports = {"part": args.port, "flat": args.port + 1}
        pids = {"part": process_tree(part_pid), "flat": process_tree(flat_pid)}
        clients = {k: httpx.Client(base_url=f"http://127.0.0.1:{p}", headers=headers, timeout=60)
                   for k, p in ports.items()}  # fmt: skip
        # The check: the last pairs of each walk (not measured), both answers byte for byte.
        for name, (walk, path) in loads.items():
            for k in range(walk.n - args.check, walk.n):
                url = path(*walk.pair(k))
                bodies = [clients[t].get(url) for t in ("part", "flat")]
                if (
                    any(r.status_code != 200 for r in bodies)
                    or bodies[0].content != bodies[1].content
                ):
                    raise SystemExit(f"{name}: the answers differ for {url}")
        print(f"check: {args.check} requests of each workload answered alike by both")
        # Warm-up: the pool's connections open (pairs before the check's, not measured).
        for walk, path in loads.values():
            paths = [
                path(*walk.pair(k)) for k in range(walk.n - args.check - 2000, walk.n - args.check)
            ]
            for target in ("part", "flat"):
                run_wrk(ports[target], paths, state["key"], 1, args.connections)
        results: dict[str, dict[str, list[dict[str, float]]]] = {
            name: {"part": [], "flat": []} for name in loads
        }
        for r in range(args.rounds):
            order = ["part", "flat"] if r % 2 == 0 else ["flat", "part"]
            for name, (walk, path) in loads.items():
                paths = [path(*walk.pair(k)) for k in range(r * per_round, (r + 1) * per_round)]
                for target in order:
                    client = clients[target]
                    ok = client.patch(f"/api/v1/systems/{systems[0][0]}", json={"name": "Bench 0"})
                    ok.raise_for_status()
                    pg = {pid: cpu_seconds([pid]) for pid in backends(dbs[target])}
                    cpu = cpu_seconds(pids[target])
                    got = run_wrk(ports[target], paths, state["key"], args.secs, args.connections)
                    got["cpu_ms"] = (cpu_seconds(pids[target]) - cpu) / got["requests"] * 1000
                    # Backends opened during the measurement count whole.
                    pg_cpu = sum(
                        cpu_seconds([pid]) - pg.get(pid, 0.0) for pid in backends(dbs[target])
                    )
                    got["pg_ms"] = pg_cpu / got["requests"] * 1000
                    got["load"] = float(load().split()[0])
                    results[name][target].append(got)
                    print(f"round {r + 1} {name} {target}: {got['rps']:.0f} req/s, p50 "
                          f"{got['p50']:.1f} ms, p99 {got['p99']:.1f} ms, {got['cpu_ms']:.2f} ms "
                          f"CPU/request (PostgreSQL {got['pg_ms']:.2f}), load {load()}", flush=True)  # fmt: skip
        for client in clients.values():
            client.close()
    print(
        f"\nAPI, {args.rounds} rounds × {args.secs} s, wrk -t1 -c{args.connections} (load {load()})"
    )
    print("| Workload | req/s partitioned (range) | req/s one table (range) | median of per-round "
          "ratios partitioned/one table | worker CPU ms/request part · flat | PostgreSQL CPU "
          "ms/request part · flat | p50 ms part · flat |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, by in results.items():

        def med(target: str, field: str, by: dict[str, list[dict[str, float]]] = by) -> float:
            return statistics.median(m[field] for m in by[target])

        def rng(target: str, field: str, by: dict[str, list[dict[str, float]]] = by) -> str:
            values = [m[field] for m in by[target]]
            return f"{min(values):,.0f}–{max(values):,.0f}"

        def ratio(field: str, by: dict[str, list[dict[str, float]]] = by) -> float:
            pairs = zip(by["part"], by["flat"], strict=True)
            return statistics.median(
                p[field] / f[field] if f[field] else math.nan for p, f in pairs
            )

        rps, cpu, pgr = ratio("rps"), ratio("cpu_ms"), ratio("pg_ms")
        print(f"| {name} | {med('part', 'rps'):,.0f} ({rng('part', 'rps')}) | "
              f"{med('flat', 'rps'):,.0f} ({rng('flat', 'rps')}) | req/s {rps:.3f}, worker CPU "
              f"{cpu:.3f}, PostgreSQL CPU {pgr:.3f} | {med('part', 'cpu_ms'):.2f} · "
              f"{med('flat', 'cpu_ms'):.2f} | {med('part', 'pg_ms'):.2f} · {med('flat', 'pg_ms'):.2f} | "
              f"{med('part', 'p50'):.1f} · {med('flat', 'p50'):.1f} |")  # fmt: skip
    (logs / "api.json").write_text(json.dumps(results))


# --- database level ------------------------------------------------------------------------------


def _buffers(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


async def measure_db(args: argparse.Namespace, state: dict[str, Any]) -> None:
    compiled = _packed(RAW).system_and_range._statement.compile(dialect=PGDialect_asyncpg())
    sql, names = str(compiled), list(compiled.positiontup or ())
    assert sorted(names) == ["end", "id", "start"], names
    end = int(datetime.fromisoformat(state["end"]).timestamp())
    ids = state["ids"]
    rng = random.Random(7)
    connections = {t: await asyncpg.connect(f"{SERVER}/{db}") for t, db in
                   (("part", args.part), ("flat", args.flat))}  # fmt: skip
    print(f"\nDatabase, {args.queries} queries per window and database, alternated (load {load()})")
    print("| Statement (window) | planning ms part · flat | execution ms part · flat | shared "
          "buffers part · flat | partitions scanned | prepared, round trip ms part · flat |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    try:
        for label, span in (("W1: system + quarter-hours, 24 h", 86_400),
                            ("system + quarter-hours, 30 days", 30 * 86_400)):  # fmt: skip
            got: dict[str, dict[str, list[float]]] = {
                t: {"plan": [], "exec": [], "buffers": [], "read": [], "parts": [], "rtt": []}
                for t in connections
            }
            prepared = {t: await c.prepare(sql) for t, c in connections.items()}
            last_start = (end - span) // 900
            first_start = (end - state["days"] * 86_400) // 900
            for q in range(args.queries):
                system_id = rng.choice(ids)
                lo = rng.randrange(first_start, last_start) * 900
                values = {"id": system_id, "start": lo, "end": lo + span}
                params = tuple(values[name] for name in names)
                order = ["part", "flat"] if q % 2 == 0 else ["flat", "part"]
                for t in order:
                    (plan,) = json.loads(await connections[t].fetchval(
                        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *params))  # fmt: skip
                    got[t]["plan"].append(plan["Planning Time"])
                    got[t]["exec"].append(plan["Execution Time"])
                    got[t]["read"].append(int(plan["Plan"].get("Shared Read Blocks", 0)))
                    got[t]["buffers"].append(
                        _buffers(plan["Plan"]) + _buffers(plan.get("Planning", {}))
                    )
                    got[t]["parts"].append(
                        len(
                            set(re.findall(r'"Relation Name": "(\w+)"', json.dumps(plan)))
                            - {"systems"}
                        )
                    )
                for t in reversed(order):
                    began = time.perf_counter()
                    await prepared[t].fetchrow(*params)
                    got[t]["rtt"].append((time.perf_counter() - began) * 1000)

            def m(field: str, digits: int = 3, got: dict[str, dict[str, list[float]]] = got) -> str:
                return " · ".join(
                    f"{statistics.median(got[t][field]):.{digits}f}" for t in ("part", "flat")
                )

            parts = sorted(set(got["part"]["parts"]))
            print(f"| {label} | {m('plan')} | {m('exec')} | {m('buffers', 0)} ({m('read', 0)} read) | "
                  f"{'–'.join(map(str, parts))} of the partitioned | {m('rtt')} |", flush=True)  # fmt: skip
    finally:
        for c in connections.values():
            await c.close()
    print(f"(load {load()})")


async def measure_drop(args: argparse.Namespace) -> int:
    """Destructive (`--drop`, on --part): the oldest month of readings and of the change log
    dropped by hand (DROP TABLE and COMMIT, timed from the client), then the daily job with a
    retention that retires the next month (`maintain_partitions`, as the runner calls it, and
    the `solarapi readings partitions` command). Rows and sizes are printed before."""
    from solarapi.config import Settings
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.timefmt import utcnow
    from solarapi.readings.jobs import maintain_partitions
    from solarapi.readings.partitions import SCHEMA, month_start

    url = f"{SERVER}/{args.part}"
    connection = await asyncpg.connect(url)
    try:
        parts = await connection.fetch(
            "SELECT c.relname, c.reltuples::bigint AS rows, pg_total_relation_size(c.oid) AS bytes"
            " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'readings'::regclass AND c.relname ~ '^m[0-9]'"
            " ORDER BY c.relname"
        )
        oldest = parts[0]
        print(f"\nDrop (load {load()}): {len(parts)} months; the oldest, {oldest['relname']}: "
              f"{oldest['rows']:,} rows, {oldest['bytes'] / 2**20:,.0f} MB with its index")  # fmt: skip
        began = time.perf_counter()
        async with connection.transaction():
            await connection.execute(f"DROP TABLE {SCHEMA}.{oldest['relname']}")
            await connection.execute(f"DROP TABLE {SCHEMA}.batches_{oldest['relname']}")
            statement = time.perf_counter() - began
        print(f"DROP TABLE of {oldest['relname']} and batches_{oldest['relname']}: "
              f"{statement * 1000:.0f} ms, with the commit {(time.perf_counter() - began) * 1000:.0f} ms")  # fmt: skip
    finally:
        await connection.close()
    # The next month past retention: the job drops it (and its log's month).
    nxt = parts[1]["relname"]
    year, month = int(nxt[1:5]), int(nxt[6:8])
    now = utcnow()
    retention = (now.year * 12 + now.month) - (year * 12 + month) - 1
    assert month_start(now, -retention) == month_start(datetime(year, month, 1, tzinfo=UTC), 1)
    settings = Settings(database_url=url, secret_key=SECRET, data_dir=Path(tempfile.mkdtemp()))
    engine = create_oneshot_engine(settings)
    try:
        began = time.perf_counter()
        done = await maintain_partitions(sessionmaker_for(engine, settings), now, retention)
        print(f"daily job (maintain_partitions, retention {retention} months): dropped "
              f"{list(done.dropped)}, created {list(done.created)}, {done.purged_rows} rows "
              f"purged, in {(time.perf_counter() - began) * 1000:.0f} ms (load {load()})")  # fmt: skip
    finally:
        await engine.dispose()
    return retention


def drop_by_command(part: str, retention: int) -> None:
    """The next month again, by the operator's command (the process whole)."""
    url = f"{SERVER}/{part}"
    env = {**os.environ, "SOLARAPI_DATABASE_URL": url, "SOLARAPI_SECRET_KEY": SECRET,
           "SOLARAPI_READINGS_RETENTION_MONTHS": str(retention - 1),
           "SOLARAPI_DATA_DIR": tempfile.mkdtemp()}  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "solarapi", "readings", "partitions"],
        env=env, check=False, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"solarapi readings partitions failed: {done.stdout}{done.stderr}")
    out = done.stdout.strip()
    print(f"`solarapi readings partitions` (retention {retention - 1} months), the process "
          f"whole: {time.perf_counter() - began:.2f} s: {out} (load {load()})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", required=True, help="the partitioned database (run.py --monthly)")
    parser.add_argument("--flat", required=True, help="its copy with readings as one table")
    parser.add_argument("--state", help="the fleet's fleet.json (default: run.py's for --part)")
    parser.add_argument("--make-flat", action="store_true", help="make --flat from --part first")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--secs", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--check", type=int, default=20)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--workloads", default="W1,W2,W3")
    parser.add_argument("--port", type=int, default=9550)
    parser.add_argument("--only", choices=["api", "db", "drop"])
    parser.add_argument("--drop", action="store_true",
                        help="after measuring: drop months of --part (destructive), timed")  # fmt: skip
    args = parser.parse_args()
    args.workloads = args.workloads.split(",")
    for name in (args.part, args.flat):
        if not name.replace("_", "").isalnum():
            raise SystemExit(f"unsafe database name {name!r}")
    state_file = Path(args.state or f"/tmp/bench-portfolio-{args.part}/fleet.json")
    state = json.loads(state_file.read_text())
    if args.make_flat:
        make_flat(args.part, args.flat)
    logs = Path(tempfile.mkdtemp(prefix="bench-parts-"))
    print(f"logs in {logs}; load {load()}")
    if args.only in (None, "api"):
        measure_api(args, state, logs)
    if args.only in (None, "db"):
        asyncio.run(measure_db(args, state))
    if args.drop or args.only == "drop":
        retention = asyncio.run(measure_drop(args))
        if retention > 1:
            drop_by_command(args.part, retention)


if __name__ == "__main__":
    main()
