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


def wrk(url: str, seconds: int, connections: int, key: str | None) -> tuple[float, str]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if key:
        command[1:1] = ["-H", f"Authorization: Bearer {key}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non2xx:
        raise SystemExit(f"{non2xx.group(1)} non-2xx responses: the run is not valid\n{output}")
    p99 = re.search(r"^\s+99%\s+(\S+)", output, re.MULTILINE)
    return rps, p99.group(1) if p99 else "?"


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
        health: list[float] = []
        account: list[float] = []
        tails: dict[str, list[str]] = {"health": [], "account": []}
        for _ in range(args.rounds):
            rps, p99 = wrk(f"{base}/health", args.seconds, args.connections, None)
            health.append(rps)
            tails["health"].append(p99)
            rps, p99 = wrk(f"{base}/account", args.seconds, args.connections, key)
            account.append(rps)
            tails["account"].append(p99)
    finally:
        proc.terminate()
        proc.wait(30)

    h, a = statistics.median(health), statistics.median(account)
    limiter = "redis" if args.redis else "memory"
    print(f"server={args.server} limiter={limiter} rounds={args.rounds}x{args.seconds}s "
          f"connections={args.connections}")  # fmt: skip
    print(f"  GET /health   median {h:8.0f} req/s  (rounds: {', '.join(f'{x:.0f}' for x in health)}; p99 {', '.join(tails['health'])})")  # fmt: skip
    print(f"  GET /account  median {a:8.0f} req/s  (rounds: {', '.join(f'{x:.0f}' for x in account)}; p99 {', '.join(tails['account'])})")  # fmt: skip
    print(f"  account / health = {a / h:.0%}")


if __name__ == "__main__":
    main()
