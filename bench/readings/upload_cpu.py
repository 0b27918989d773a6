"""What an upload costs: the small upload's CPU (an hour of a meter: 4 quarter-hours) in the
API process and in PostgreSQL, and the bulk upload's rate (10,000 quarter-hours a request)
against the floor of a bare `COPY` of the same rows into the same table.

    .venv/bin/python bench/readings/upload_cpu.py small [--backend postgres|sqlite]
        [--seconds 10] [--rounds 3] [--connections 8]
    .venv/bin/python bench/readings/upload_cpu.py bulk [--batches 20]

`small`: a fresh migrated database, one `solarapi serve` (one worker, in-memory limiter,
`SOLARAPI_RATE_LIMIT_SCALE` high enough that no window binds, jobs `external`), 500 metered
systems made through the API, each with an ingest token. Each round runs `wrk -t1` twice:
`POST /systems/{id}/readings` with an Enterprise key, then `POST /ingest/readings` with the
systems' tokens — every request 4 new quarter-hours of the next system (round-robin), so
every upload is of new readings, the usual case. CPU per request from `/proc/<pid>/stat`
(utime + stime, as bench/scale reads it): the server's process tree, and the PostgreSQL
backends serving the database (`pg_stat_activity`, the measuring connection excluded).
Every response must be a 2xx.

`bulk` (PostgreSQL): 10,000 quarter-hours of one system a request (a new system each
batch, so every batch inserts), bodies serialised before timing, sent one at a time over one
keep-alive connection; readings/s is the batch's readings over its wall time. The floor: the
same rows `COPY`'d (asyncpg's `copy_records_to_table`, binary) into `readings` of the same database by a client
process in one transaction per batch — no validation, no rollups, no change feed, no event.
Reported as the ratio API ÷ floor. Then the bytes on disk per stored quarter-hour (after
`VACUUM ANALYZE`; partitions included) of `readings` and, per uploaded quarter-hour (the
floor's rows have none), of the change feed's log and the two rollups.
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent.parent))

from harness import cpu_seconds, fresh_database, make_account, process_tree, server_process

SYSTEMS = 500

SCRIPT = """
local lines = {}
for line in io.lines("TARGETS") do lines[#lines + 1] = line end
local n = 0
request = function()
  n = n + 1
  local i = (n % #lines) + 1
  local system, credential = lines[i]:match("(%S+) (%S+)")
  local t0 = BASE + math.floor(n / #lines) * 3600
  local items = {}
  for q = 0, 3 do
    items[#items + 1] = string.format('{"timestamp":"%s","energy_wh":500.0,"power_w":2000.0}',
      os.date("!%Y-%m-%dT%H:%M:%SZ", t0 + q * 900))
  end
  local path = "/api/v1/ingest/readings"
  if MODE == "key" then path = "/api/v1/systems/" .. system .. "/readings" end
  return wrk.format("POST", path,
    {["Authorization"] = "Bearer " .. credential, ["Content-Type"] = "application/json"},
    '{"readings":[' .. table.concat(items, ",") .. ']}')
end
"""


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def backend_pids(url: str) -> list[int]:
    """The PostgreSQL backends of the database at `url`, this query's own excluded."""
    out = subprocess.run(
        ["psql", url, "-Atc", "SELECT pid FROM pg_stat_activity WHERE datname = "
         "current_database() AND pid <> pg_backend_pid()"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return [int(line) for line in out.split()]


def run_wrk(base: str, script: Path, seconds: int, connections: int) -> tuple[int, int, float]:
    """Requests made, non-2xx responses, wrk's own CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), base],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    made = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return made, int(bad.group(1)) if bad else 0, cpu


def _systems(client: httpx.Client, count: int) -> list[tuple[str, str]]:
    """`count` metered systems, each with an ingest token: (system id, token)."""
    made = []
    for number in range(count):
        created = client.post("/api/v1/systems", json={
            "name": f"Upload {number}", "capacity_kwp": 10.0,
            "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
        })  # fmt: skip
        created.raise_for_status()
        system_id = created.json()["id"]
        token = client.post(f"/api/v1/systems/{system_id}/ingest-tokens", json={"name": "meter"})
        token.raise_for_status()
        made.append((system_id, token.json()["token"]))
    return made


def small(backend: str, seconds: int, rounds: int, connections: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-upload-cpu-") as scratch,
        fresh_database("upload_cpu", backend) as db,
    ):
        work = Path(scratch)
        import asyncio

        _, keys = asyncio.run(make_account(db.settings, 1))
        env = {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "100000"}
        url = db.env.get("SOLARAPI_DATABASE_URL")
        with server_process(env) as (base, pid):
            headers = {"Authorization": f"Bearer {keys[0]}"}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                systems = _systems(client, SYSTEMS)
            by_key = work / "key.txt"
            by_key.write_text("".join(f"{s} {keys[0]}\n" for s, _ in systems))
            by_token = work / "token.txt"
            by_token.write_text("".join(f"{s} {t}\n" for s, t in systems))
            # Hours from 40 days back, each run further on: every upload is of new readings.
            now = int(time.time())
            first = now - now % 3600 - 40 * 86400

            def script(run: int, mode: str) -> Path:
                file = work / f"{mode}-{run}.lua"
                file.write_text(
                    SCRIPT.replace("TARGETS", str(by_key if mode == "key" else by_token))
                    .replace("MODE", f'"{mode}"')
                    .replace("BASE", str(first + run * 40 * 3600))
                )
                return file

            print(f"small uploads on {backend}: 4 new quarter-hours a request, "
                  f"wrk -t1 -c{connections} -d{seconds}s; load average {load_average()}")  # fmt: skip
            run = 0
            for mode in ("key", "token"):  # warm: connections, prepared statements, imports
                run_wrk(base, script(run, mode), 2, connections)
                run += 1
            results: dict[str, list[tuple[float, float, float, float]]] = {"key": [], "token": []}
            for round_no in range(rounds):
                for mode in ("key", "token"):
                    lua = script(run, mode)
                    run += 1
                    server = process_tree(pid)
                    pg = backend_pids(url) if url else []
                    s0, p0 = cpu_seconds(server), cpu_seconds(pg)
                    made, bad, wrk_cpu = run_wrk(base, lua, seconds, connections)
                    pg = sorted(set(pg) | set(backend_pids(url))) if url else []
                    s1, p1 = cpu_seconds(process_tree(pid)), cpu_seconds(pg)
                    row = (made / seconds, (s1 - s0) / made * 1e3, (p1 - p0) / made * 1e3,
                           wrk_cpu / made * 1e3)  # fmt: skip
                    results[mode].append(row)
                    print(f"  round {round_no + 1} {mode:5}: {row[0]:6.0f} req/s"
                          f"{f' ({bad} non-2xx!)' if bad else ''}; CPU ms/request: API "
                          f"{row[1]:.2f}, PostgreSQL {row[2]:.2f}, wrk {row[3]:.2f}; "
                          f"load {load_average()}", flush=True)  # fmt: skip
                    if bad:
                        raise SystemExit("non-2xx responses: the figures are void")
            for mode, rows in results.items():
                med = [statistics.median(row[i] for row in rows) for i in range(4)]
                path = "POST /systems/{id}/readings" if mode == "key" else "POST /ingest/readings"
                print(f"{path} median: {med[0]:.0f} req/s; CPU ms/request API {med[1]:.2f} "
                      f"(target ≤ 2), PostgreSQL {med[2]:.2f} (target ≤ 1), wrk {med[3]:.2f}")  # fmt: skip


def _batch(start: int, count: int) -> list[tuple[int, float, float]]:
    return [(start + i * 900, float(100 + i % 400), float(400 + i % 1600)) for i in range(count)]


def _copy_floor(url: str, system_id: str, rows: list[tuple[int, float, float]]) -> float:
    """Seconds to COPY `rows` into readings (binary, one transaction) with asyncpg, the
    service's driver, from a client process of its own."""
    import asyncio

    import asyncpg

    async def copy() -> float:
        connection = await asyncpg.connect(url)
        try:
            records = [(system_id, start, energy, power) for start, energy, power in rows]
            began = time.perf_counter()
            async with connection.transaction():
                await connection.copy_records_to_table(
                    "readings", records=records,
                    columns=["system_id", "start_s", "energy_wh", "power_w"],
                )  # fmt: skip
            return time.perf_counter() - began
        finally:
            await connection.close()

    return asyncio.run(copy())


def bulk(batches: int) -> None:
    with fresh_database("upload_bulk", "postgres") as db:
        import asyncio

        _, keys = asyncio.run(make_account(db.settings, 1))
        env = {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "100000"}
        url = db.env["SOLARAPI_DATABASE_URL"]
        now = int(time.time())
        first = now - now % 86400 - 120 * 86400  # 10,000 quarter-hours end ~16 days ago
        with server_process(env) as (base, _):
            headers = {"Authorization": f"Bearer {keys[0]}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                systems = _systems(client, 2 * batches + 2)
                print(f"bulk upload on postgres: {batches} batches of 10,000 quarter-hours; "
                      f"load average {load_average()}")  # fmt: skip
                rows = _batch(first, 10_000)
                body = orjson.dumps({"readings": [
                    {"timestamp": datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "energy_wh": e, "power_w": p} for s, e, p in rows
                ]})  # fmt: skip
                api, floor = [], []
                # Warm-up: one of each.
                client.post(f"/api/v1/systems/{systems[0][0]}/readings", content=body,
                            headers={"Content-Type": "application/json"}).raise_for_status()  # fmt: skip
                _copy_floor(url, systems[1][0], rows)
                for i in range(batches):
                    began = time.perf_counter()
                    answer = client.post(
                        f"/api/v1/systems/{systems[2 + 2 * i][0]}/readings", content=body,
                        headers={"Content-Type": "application/json"},
                    )  # fmt: skip
                    api.append(time.perf_counter() - began)
                    answer.raise_for_status()
                    assert answer.json()["inserted"] == 10_000, answer.text
                    floor.append(_copy_floor(url, systems[3 + 2 * i][0], rows))
            sizes = _bytes_per_quarter_hour(url)
        api_rate = 10_000 / statistics.median(api)
        floor_rate = 10_000 / statistics.median(floor)
        print(f"API: {api_rate:,.0f} readings/s (median of {batches}; target ≥ 150,000); "
              f"bare COPY: {floor_rate:,.0f} readings/s; API ÷ COPY {api_rate / floor_rate:.2f}; "
              f"load average {load_average()}")  # fmt: skip
        print("bytes per stored quarter-hour (VACUUM ANALYZE first; tables + indexes): "
              + ", ".join(f"{name} {value:.1f}" for name, value in sizes.items()))  # fmt: skip


# Each table with its partitions (readings and, from migration 0021, the change log's
# batches); the uploaded readings are those with a batch (the COPY floor's have none).
_SIZES = """
SELECT (SELECT count(*) FROM readings), (SELECT count(batch) FROM readings),
{sizes}
"""


def _bytes_per_quarter_hour(url: str) -> dict[str, float]:
    """Bytes on disk (heap + indexes + TOAST, partitions included) per stored reading of
    `readings`, the change feed's log and the two rollups. The COPY floor's rows have no log
    and no rollups: `readings` per its own rows, the others per uploaded (logged) reading."""
    tables = ("readings", "change_batches", "reading_hours", "reading_days")
    subprocess.run(["psql", url, "-qc", "VACUUM ANALYZE"], check=True)
    sizes = ",\n".join(
        # pg_partition_tree gives no row for a table that is not partitioned.
        f"coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('{t}')),"  # noqa: S608
        f" pg_total_relation_size('{t}'))"
        for t in tables
    )
    out = subprocess.run(
        ["psql", url, "-Atc", _SIZES.format(sizes=sizes)], check=True, capture_output=True,
        text=True,
    ).stdout.strip().split("|")  # fmt: skip
    stored, uploaded = int(out[0]), int(out[1])
    per = {t: int(v) / (stored if t == "readings" else uploaded)
           for t, v in zip(tables, out[2:], strict=True)}  # fmt: skip
    return {**per, "all": sum(per.values())}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("small")
    p.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=8)
    p = sub.add_parser("bulk")
    p.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    if args.command == "small":
        small(args.backend, args.seconds, args.rounds, args.connections)
    else:
        bulk(args.batches)


if __name__ == "__main__":
    main()
