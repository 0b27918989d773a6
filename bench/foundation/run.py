"""Per-request cost of authentication + rate limiting, as a client sees it.

Starts a real single-worker server on 127.0.0.1 and drives it with `wrk`, alternating
`GET /api/v1/health` (no key, no limit counted) and `GET /api/v1/account` (Bearer key:
key lookup, plan, both rate-limit windows) in the same run, several rounds each, and reports
the median requests per second of each and their ratio.

    .venv/bin/python bench/foundation/run.py                     # uvicorn, memory limiter
    .venv/bin/python bench/foundation/run.py --redis             # uvicorn, Redis limiter
    .venv/bin/python bench/foundation/run.py --server granian    # needs granian importable,
        # e.g. `uv pip install --target /tmp/granian-pkgs granian` and
        # PYTHONPATH=/tmp/granian-pkgs (kept out of the project's dependencies)

The bench key's limits are multiplied by SOLARAPI_RATE_LIMIT_SCALE so no request is
refused: a 429 is cheaper than a 200 and would flatter the authenticated figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def solarapi(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [PYTHON, "-m", "solarapi", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def start_server(server: str, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    if server == "uvicorn":
        command = [PYTHON, "-m", "solarapi", "serve", "--port", str(port)]
    else:
        # The same app factory and logging as `solarapi serve`, under granian.
        command = [
            PYTHON, "-m", "granian", "--interface", "asgi", "--factory",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--loop", "uvloop", "--no-ws", "--log-level", "warning",
            "bench.foundation.granian_app:create",
        ]  # fmt: skip
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("server did not start")


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of a process and its descendants (granian serves from a child)."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = int(fields[11]) + int(fields[12])
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(times.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def measure(
    pid: int, url: str, seconds: int, connections: int, key: str | None
) -> tuple[float, float, str]:
    """Requests per second, server CPU microseconds per request, p99 latency.

    CPU per request is the steadier figure on a shared machine: other tenants' load moves
    throughput a lot between rounds, but hardly what one request costs the server.
    """
    before = tree_cpu_seconds(pid)
    rps, requests, p99 = wrk(url, seconds, connections, key)
    cpu = tree_cpu_seconds(pid) - before
    return rps, cpu / requests * 1e6, p99


def wrk(url: str, seconds: int, connections: int, key: str | None) -> tuple[float, int, str]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if key:
        command[1:1] = ["-H", f"Authorization: Bearer {key}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non2xx:
        raise SystemExit(f"{non2xx.group(1)} non-2xx responses: the run is not valid\n{output}")
    p99 = re.search(r"^\s+99%\s+(\S+)", output, re.MULTILINE)
    requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    return rps, requests, p99.group(1) if p99 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["uvicorn", "granian"], default="uvicorn")
    parser.add_argument("--redis", action="store_true", help="Redis rate limiter")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--database-url", default="", help="default: SQLite in a temp dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="bench-foundation-"))
    env = {
        **os.environ,
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_DATABASE_URL": args.database_url,
        "SOLARAPI_REDIS_URL": args.redis_url if args.redis else "",
        "SOLARAPI_RATE_LIMIT_SCALE": "1000000",
        "SOLARAPI_JOB_RUNNER": "external",
        "SOLARAPI_LOG_LEVEL": "INFO",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    solarapi(env, "migrate")
    email = f"bench-{uuid.uuid4().hex[:8]}@example.com"  # a database may be reused
    solarapi(
        env, "accounts", "create", "--name", "Bench", "--email", email,
        "--password", "bench password 123", "--plan", "enterprise",
    )  # fmt: skip
    key = json.loads(solarapi(env, "keys", "create", "--account", email, "--json"))["key"]

    port = free_port()
    proc = start_server(args.server, env, port)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        # Warm-up: imports, connection pools, the key's first last_used_at write.
        wrk(f"{base}/health", 2, args.connections, None)
        wrk(f"{base}/account", 2, args.connections, key)
        runs: dict[str, list[tuple[float, float, str]]] = {"health": [], "account": []}
        for _ in range(args.rounds):
            runs["health"].append(
                measure(proc.pid, f"{base}/health", args.seconds, args.connections, None)
            )
            runs["account"].append(
                measure(proc.pid, f"{base}/account", args.seconds, args.connections, key)
            )
    finally:
        proc.terminate()
        proc.wait(30)

    limiter = "redis" if args.redis else "memory"
    print(f"server={args.server} limiter={limiter} rounds={args.rounds}x{args.seconds}s "
          f"connections={args.connections}")  # fmt: skip
    medians = {}
    for name, results in runs.items():
        rps = statistics.median(r[0] for r in results)
        cpu = statistics.median(r[1] for r in results)
        medians[name] = (rps, cpu)
        print(
            f"  GET /{name:<8} median {rps:6.0f} req/s, {cpu:5.0f} µs CPU/request  "
            f"(req/s by round: {', '.join(f'{r[0]:.0f}' for r in results)}; "
            f"p99: {', '.join(r[2] for r in results)})"
        )
    h, a = medians["health"][0], medians["account"][0]
    print(f"  account / health throughput = {a / h:.0%}; "
          f"by CPU per request = {medians['health'][1] / medians['account'][1]:.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
