"""Benchmark: what the Prometheus metrics cost per request.

    .venv/bin/python bench/foundation/metrics_overhead.py [--seconds 8] [--rounds 3]

Three measurements:
  1. The recording itself, in-process: `Recorder.request` (one counter increment and one
     histogram observation, the work the gateway adds to every request) with the values in
     a multiprocess directory, as under `solarapi serve` — median of 5 × 200,000 calls.
  2. The gateway with and without metrics, in-process: CPU time (`time.process_time`) per
     request of an unknown API path (404: routing, the limiter's peek, the error rendering,
     no database), through the ASGI app, in a fresh process per mode, alternated three
     times — median of 7 × 2,000 requests each.
  3. End to end: a single-worker `solarapi serve` on SQLite with metrics off and on
     (SOLARAPI_METRICS_PORT), alternated `--rounds` times; `wrk` (1 thread, 16 connections,
     `--seconds`) on `GET /api/v1/health` and on the hot read path
     `GET /api/v1/systems/{id}/readings` (1 day of `1h`) with an Enterprise key. The limits
     are scaled up (SOLARAPI_RATE_LIMIT_SCALE) so no 429 is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent))

from harness import free_port, fresh_database, make_account, server_process, serving, upload_a_year

DAY = "from=2024-06-15T00:00:00Z&to=2024-06-16T00:00:00Z&interval=1h"


def recording_cost() -> float:
    """Microseconds per `Recorder.request` call, values in a multiprocess directory."""
    directory = tempfile.mkdtemp(prefix="bench-metrics-")
    code = f"""
import os, timeit, statistics
os.environ["PROMETHEUS_MULTIPROC_DIR"] = {directory!r}
from solarapi.metrics.recorder import RECORDER
RECORDER.request("/api/v1/systems/{{system_id}}/readings", "GET", 200, 0.004)
runs = [timeit.timeit(
    lambda: RECORDER.request("/api/v1/systems/{{system_id}}/readings", "GET", 200, 0.004),
    number=200_000) for _ in range(5)]
print(statistics.median(runs) / 200_000 * 1e6)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


TICKS = os.sysconf("SC_CLK_TCK")


GATEWAY_ONLY = """
import asyncio, os, statistics, sys, tempfile, time
mode = sys.argv[1]
if mode == "on":
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp()
from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.migrate import upgrade
settings = Settings(data_dir=tempfile.mkdtemp(), secret_key="x" * 40, job_runner="external",
                    metrics_port=9 if mode == "on" else None)
upgrade(settings)
app = create_app(settings)
scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
         "scheme": "http", "path": "/api/v1/nope", "raw_path": b"/api/v1/nope",
         "query_string": b"", "root_path": "", "headers": [(b"host", b"x")],
         "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}
async def send(message):
    pass
async def main():
    async with app.router.lifespan_context(app):
        for _ in range(500):
            await app({**scope, "app": app}, receive, send)
        runs = []
        for _ in range(7):
            started = time.process_time()
            for _ in range(2000):
                await app({**scope, "app": app}, receive, send)
            runs.append((time.process_time() - started) / 2000 * 1e6)
        print(statistics.median(runs))
asyncio.run(main())
"""


def gateway_cost(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", GATEWAY_ONLY, mode], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (all threads)


def wrk(url: str, seconds: int, key: str | None) -> tuple[float, int]:
    args = ["wrk", "-t1", "-c16", f"-d{seconds}s", url]
    if key:
        args[1:1] = ["-H", f"Authorization: Bearer {key}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    count = re.search(r"(\d+) requests in", out)
    assert match, out
    assert count, out
    if "Non-2xx" in out:
        raise RuntimeError(f"non-2xx answers measured:\n{out}")
    return float(match.group(1)), int(count.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    print(f"Recorder.request: {recording_cost():.2f} µs per call (multiprocess mode)")
    gateway: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(3):
        for mode in ("off", "on"):
            gateway[mode].append(gateway_cost(mode))
    off, on = statistics.median(gateway["off"]), statistics.median(gateway["on"])
    print(
        f"gateway-only request (404), CPU: off {off:.1f} µs, on {on:.1f} µs ({on - off:+.1f} µs); "
        f"runs off {[round(v, 1) for v in gateway['off']]} on {[round(v, 1) for v in gateway['on']]}",
        flush=True,
    )

    with fresh_database("metrics", "sqlite") as db:
        _, (key,) = asyncio.run(make_account(db.settings, 1))
        env = {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "1000"}
        with (
            serving(env) as base,
            httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as client,
        ):
            created = client.post(
                "/api/v1/systems",
                json={"name": "Bench", "capacity_kwp": 10,
                      "location": {"latitude": 52, "longitude": 5, "timezone": "UTC"}},
            )  # fmt: skip
            created.raise_for_status()
            system = created.json()["id"]
            upload_a_year(
                client, system, datetime(2024, 6, 1, tzinfo=UTC), datetime(2024, 7, 1, tzinfo=UTC)
            )
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                mode_env = dict(env)
                if mode == "on":
                    mode_env["SOLARAPI_METRICS_PORT"] = str(free_port())
                with server_process(mode_env) as (base, pid):
                    for name, path, auth in (
                        ("health", "/api/v1/health", None),
                        ("readings 1 day 1h", f"/api/v1/systems/{system}/readings?{DAY}", key),
                    ):
                        wrk(f"{base}{path}", 2, auth)  # warm-up
                        cpu = cpu_seconds(pid)
                        rate, count = wrk(f"{base}{path}", args.seconds, auth)
                        per_request = (cpu_seconds(pid) - cpu) / count * 1e6
                        results.setdefault((name, mode), []).append((rate, per_request))
                        print(
                            f"  {mode:>3} {name:<18} {rate:8.0f} req/s "
                            f"{per_request:7.0f} µs CPU/request",
                            flush=True,
                        )
    print(f"load average at the end: {os.getloadavg()}")
    for name in ("health", "readings 1 day 1h"):
        off = statistics.median(r for r, _ in results[(name, "off")])
        on = statistics.median(r for r, _ in results[(name, "on")])
        cpu_off = statistics.median(c for _, c in results[(name, "off")])
        cpu_on = statistics.median(c for _, c in results[(name, "on")])
        print(
            f"{name:<18} req/s off {off:6.0f} on {on:6.0f} ({(on / off - 1) * 100:+.1f} %); "
            f"CPU/request off {cpu_off:5.0f} µs on {cpu_on:5.0f} µs ({cpu_on - cpu_off:+.0f} µs)"
        )


if __name__ == "__main__":
    start = time.monotonic()
    main()
    print(f"took {time.monotonic() - start:.0f} s")
