"""Instructions per request of the fleet benchmark's readings workloads, counted by valgrind
callgrind (the same under any load): one `solarapi serve` worker under `valgrind
--tool=callgrind --instr-atstart=no` on a fleet the benchmark built, SOLARAPI_JOB_RUNNER=
external, one keep-alive connection; per kind 60 warm-up requests, then instrumentation on,
`callgrind_control -z`, COUNT requests (each a different one, from the benchmark's own walk:
its `Fleet.walk`/`Fleet.path`), `callgrind_control -d`, instrumentation off. Prints each
kind's instructions per request and a hash of the bodies (two versions answering the same
requests must print the same hash).

    FLEET_DIR=<the fleet benchmark's folder> SOLARAPI_DATABASE_URL=… SOLARAPI_DATA_DIR=… \\
        .venv/bin/python bench/fleet/callgrind.py <src> <out prefix> poll,daily,month [key]

`<src>`: the `src` directory to serve (this checkout's, or another version's from `git
archive`), or `floor` for the benchmark's floor (`floor_app.py`; FLOOR_ACCOUNT names the
account its list shows, FLEET_API a running project's `…/api/v1` that lists the fleet, and
`key` that project's key); CALLGRIND_ARGS adds valgrind options (e.g. `--cache-sim=yes
--branch-sim=yes` to see misses beside instructions); `portfolio` as a kind sends PORTFOLIO_PATH (10 requests) instead of a walk;
`kept-<kind>` sends one request of that kind's walk every time (after the warm-up, each is
answered from what the worker keeps: the constant cost of a request) and `live`
`/api/v1/health/live`.
COUNT (default 200), PORT (default 9471). Without `key` a fresh key of the fleet account is
made through the CLI.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ["FLEET_DIR"])

import common as fleet_common
import run as fleet_run  # the benchmark's run.py: its Fleet and walks
from common import new_key

ROOT = Path(__file__).resolve().parents[2]


def total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    return 0


def main() -> None:
    src, out, kinds = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    key = sys.argv[4] if len(sys.argv) > 4 else new_key("callgrind")
    port = int(os.environ.get("PORT", "9471"))
    count = int(os.environ.get("COUNT", "200"))
    env = dict(os.environ, SOLARAPI_RATE_LIMIT_SCALE="100000", SOLARAPI_LOG_LEVEL="WARNING",
               SOLARAPI_JOB_RUNNER="external", PYTHONPATH=src)  # fmt: skip
    served = ["-m", "solarapi", "serve", "--host", "127.0.0.1", "--port", str(port)]
    if src == "floor":  # the benchmark's floor, on the same walk
        url = os.environ["SOLARAPI_DATABASE_URL"]
        env.update(FLOOR_DB=url if url.startswith("sqlite") else fleet_common.pg_dsn(url),
                   FLOOR_ACCOUNT=os.environ["FLOOR_ACCOUNT"])  # fmt: skip
        served = ["-m", "uvicorn", "--app-dir", os.environ["FLEET_DIR"], "floor_app:app",
                  "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                  "--no-access-log"]  # fmt: skip
    with open(f"{out}.log", "wb") as log:  # the server's output (the child keeps its own fd)
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             *os.environ.get("CALLGRIND_ARGS", "").split(),
             f"--callgrind-out-file={out}.%p", str(ROOT / ".venv/bin/python"), *served],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def control(*args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(server.pid)], check=True, capture_output=True
        )

    for _ in range(600):  # valgrind starts the server slowly
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            probe.request("GET", "/api/v1/health/live")
            probe.getresponse().read()
            break
        except OSError:
            time.sleep(0.5)
    # The floor cannot list the fleet as the API does: FLEET_API names a project server to ask.
    # Only the walks need the fleet's systems: `portfolio` and `live` run on any database (a
    # bench/portfolio fleet is not the fleet benchmark's and has no walk).
    walked = [k for k in kinds if k not in ("portfolio", "live")]
    api = os.environ.get("FLEET_API", f"http://127.0.0.1:{port}/api/v1")
    fleet = fleet_run.Fleet(api, key) if walked else None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {key}"}

    def get(path: str) -> bytes:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, (response.status, body[:300])
        return body

    def paths(kind: str, seed: int, n: int) -> list[str]:
        if kind == "portfolio":
            return [os.environ["PORTFOLIO_PATH"]] * n
        if kind == "live":
            return ["/api/v1/health/live"] * n
        assert fleet is not None
        if kind.startswith("kept-"):  # one request of the walk, again and again: kept
            size, a, b = fleet.walk(kind[5:], 7)
            return [fleet.path(kind[5:], b % size)] * n
        size, a, b = fleet.walk(kind, seed)
        return [fleet.path(kind, (a * k + b) % size) for k in range(n)]

    counts = {}
    for kind in kinds:
        n = 10 if kind == "portfolio" else count
        for path in paths(kind, 7, 5 if kind == "portfolio" else 60):
            get(path)
        control("-i", "on")
        control("-z")
        bodies = hashlib.sha256()
        for path in paths(kind, 11, n):
            bodies.update(get(path))
        control("-d", kind)
        control("-i", "off")
        counts[kind] = (n, bodies.hexdigest()[:16])
    server.terminate()
    server.wait()
    for dump in sorted(Path(out).parent.glob(f"{Path(out).name}.*.[0-9]*")):
        trigger = next(
            (line.split("dump ", 1)[1] for line in dump.read_text().splitlines()
             if line.startswith("desc: Trigger: dump ")), None,
        )  # fmt: skip
        if trigger in counts:
            n, digest = counts[trigger]
            print(f"{trigger}: {total(dump) // n:,} instructions per request (bodies {digest})")


if __name__ == "__main__":
    main()
