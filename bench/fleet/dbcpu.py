"""CPU per uncached request on both sides of the driver: the API worker's and PostgreSQL's,
for the fleet benchmark's workloads — the figures `docs/scaling.md`'s capacity model needs
(the fleet benchmark itself reads only the server's CPU, not the database's).

    FLEET_DIR=<the fleet benchmark's folder> SOLARAPI_DATABASE_URL=postgresql://…/fleet \\
        SOLARAPI_SECRET_KEY=… SOLARAPI_DATA_DIR=… \\
        .venv/bin/python bench/fleet/dbcpu.py [poll,daily,month,list] [key]

On a fleet the benchmark built (and `solarapi worker --once` ran on), it starts one
`solarapi serve` worker (jobs external, rate limits out of the way) and, as a reference, the
benchmark's floor (bare Starlette, one SQL query, no authentication) on the same database;
for each kind and target it runs `wrk -t1 -c16` for SECS (default 10) seconds, ROUNDS (default
3) times, with the benchmark's own walk (every request another system or window), and reads
from `/proc` the CPU (user + system) the target's process tree spent and the CPU the
database's backends spent (`pg_stat_activity` of the fleet's database, this script's own
connection excluded; listed before and after each run, a backend opened during it counted
whole, one that ended during it not at all). The first round of each kind and target starts with 2 s of another seed's walk, not
counted, so that the pool's connections are open; no request is asked twice, so nothing a
worker keeps answers one. Per request: medians over the rounds. On SQLite the database's CPU is
inside the worker; only the worker's column is printed.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: harness
sys.path.insert(0, str(HERE.parent / "readings"))  # upload_cpu's backend_pids
sys.path.insert(0, os.environ["FLEET_DIR"])

import common as fleet_common  # noqa: E402 - the benchmark's folder, added above
import run as fleet_run  # noqa: E402
from common import new_key  # noqa: E402
from upload_cpu import backend_pids, load_average  # noqa: E402

from harness import cpu_seconds, free_port, process_tree, wait_for  # noqa: E402

SECS = int(os.environ.get("SECS", "10"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CONNS = int(os.environ.get("CONNS", "16"))


def wrk(base: str, script: Path, seconds: int) -> int:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{CONNS}", f"-d{seconds}s", "-s", str(script), base],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx responses:\n{out}")
    return int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]


def start(target: str, port: int, url: str, account: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SOLARAPI_RATE_LIMIT_SCALE="100000", SOLARAPI_LOG_LEVEL="WARNING",
               SOLARAPI_JOB_RUNNER="external")  # fmt: skip
    command = [sys.executable, "-m", "solarapi", "serve", "--port", str(port)]
    if target == "floor":
        env.update(FLOOR_DB=url if url.startswith("sqlite") else fleet_common.pg_dsn(url),
                   FLOOR_ACCOUNT=account)  # fmt: skip
        command = [sys.executable, "-m", "uvicorn", "--app-dir", os.environ["FLEET_DIR"],
                   "floor_app:app", "--host", "127.0.0.1", "--port", str(port),
                   "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    kinds = (sys.argv[1] if len(sys.argv) > 1 else "poll,daily,month,list").split(",")
    key = sys.argv[2] if len(sys.argv) > 2 else new_key("dbcpu")
    url = os.environ["SOLARAPI_DATABASE_URL"]
    postgres = not url.startswith("sqlite")
    ports = {"project": free_port(), "floor": free_port()}
    project = start("project", ports["project"], url, "")
    servers = {"project": project}
    try:
        wait_for(f"http://127.0.0.1:{ports['project']}")
        api = f"http://127.0.0.1:{ports['project']}/api/v1"
        fleet = fleet_run.Fleet(api, key)
        account = fleet_common.get_json(f"{api}/account", key)["id"]
        servers["floor"] = start("floor", ports["floor"], url, account)
        wait_for_floor(ports["floor"])
        work = Path(tempfile.mkdtemp(prefix="dbcpu-"))
        results: dict[str, dict[str, list[tuple[float, float, int]]]] = {}
        print(f"{'PostgreSQL' if postgres else 'SQLite'}; wrk -t1 -c{CONNS}, {SECS} s x "
              f"{ROUNDS} rounds; load {load_average()}", flush=True)  # fmt: skip
        for rnd in range(ROUNDS):
            for kind in kinds:
                script = work / f"{kind}-{rnd}.lua"
                script.write_text(fleet.lua(kind, key, 100 + rnd))
                for target, server in servers.items():
                    base = f"http://127.0.0.1:{ports[target]}"
                    if rnd == 0:  # the pool's connections opened, the code warm: not counted
                        warm = work / f"{kind}-warm.lua"  # another seed: nothing it asks repeats
                        warm.write_text(fleet.lua(kind, key, 999))
                        wrk(base, warm, 2)
                    pids = process_tree(server.pid)
                    dsn = fleet_common.pg_dsn(url)
                    backends = {p: cpu_seconds([p]) for p in backend_pids(dsn)} if postgres else {}
                    own = cpu_seconds(pids)
                    made = wrk(base, script, SECS)
                    own = (cpu_seconds(pids) - own) * 1000 / made
                    # A backend opened during the run counts all its CPU (it had none before);
                    # one that ended during it counts nothing (its /proc entry is gone).
                    after = {p: cpu_seconds([p]) for p in backend_pids(dsn)} if postgres else {}
                    db = sum(cpu - backends.get(p, 0.0) for p, cpu in after.items()) * 1000 / made
                    results.setdefault(kind, {}).setdefault(target, []).append((own, db, made))
                    print(f"  round {rnd + 1} {kind:6} {target:8} {made / SECS:8.0f} req/s  "
                          f"worker {own:.3f} ms  database {db:.3f} ms  load {load_average()}",
                          flush=True)  # fmt: skip
        print("medians (ms of CPU per request):")
        for kind, targets in results.items():
            line = [f"{kind:6}"]
            for target, rows in targets.items():
                own = statistics.median(r[0] for r in rows)
                db = statistics.median(r[1] for r in rows)
                rate = statistics.median(r[2] for r in rows) / SECS
                line.append(f"{target} {rate:,.0f} req/s, worker {own:.3f}"
                            + (f" + database {db:.3f}" if postgres else ""))  # fmt: skip
            print("  " + " | ".join(line))
    finally:
        for server in servers.values():
            server.terminate()
            server.wait(10)


def wait_for_floor(port: int) -> None:
    import time

    import httpx

    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the floor did not start")


if __name__ == "__main__":
    main()
