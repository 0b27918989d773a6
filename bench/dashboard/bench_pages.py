"""Dashboard page timings through HTTP against a real `solarapi serve` with the demo data.

Usage: .venv/bin/python bench/dashboard/bench_pages.py [--rounds 30]
Starts its own server on a fresh SQLite data directory (migrate + demo: about a minute),
logs in as demo-enterprise@example.com and times each page; prints medians and p95.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx

from solarapi.dashboard.chart import ChartPoint, render_chart

PASSWORD = "solar-demo-password"  # the demo accounts' published password


def _serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def _time(client: httpx.Client, url: str, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return samples


def _report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(len(ordered) * 0.95) - 1)]
    print(f"{name:<44} median {statistics.median(samples):7.1f} ms   p95 {p95:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="bench-dashboard-")
    env = {
        **os.environ,
        "SOLARAPI_DATA_DIR": data_dir,
        "SOLARAPI_DATABASE_URL": f"sqlite:///{data_dir}/solar.db",
        "SOLARAPI_LOG_LEVEL": "WARNING",
        "SOLARAPI_REDIS_URL": "",
    }
    cli = [sys.executable, "-m", "solarapi"]
    subprocess.run([*cli, "migrate"], env=env, check=True, capture_output=True)
    subprocess.run([*cli, "demo"], env=env, check=True, capture_output=True)
    port = 8799
    proc = _serve(env, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            login_times = []
            for _ in range(10):
                client.cookies.clear()
                form = client.get("/login")
                token = re.search(r'name="csrf" value="([^"]+)"', form.text)
                assert token
                started = time.perf_counter()
                done = client.post(
                    "/login",
                    data={
                        "csrf": token.group(1),
                        "email": "demo-enterprise@example.com",
                        "password": PASSWORD,
                    },
                )
                login_times.append((time.perf_counter() - started) * 1000)
                assert done.status_code == 303
            overview = client.get("/overview")
            system_id = re.search(r'id="system-(sys_[0-9A-Z]+)"', overview.text)
            assert system_id
            system = f"/systems/{system_id.group(1)}"
            today = datetime.now(ZoneInfo("Europe/Amsterdam")).date()
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as anonymous:
                _report("GET /login (logged out)", _time(anonymous, "/login", args.rounds))
            _report("POST /login (Argon2id verify)", login_times)
            _report("GET /overview (2 systems, summaries)", _time(client, "/overview", args.rounds))
            _report("GET /settings/api", _time(client, "/settings/api", args.rounds))
            _report("GET /usage", _time(client, "/usage", args.rounds))
            _report("GET system, 7 days of 1d (default)", _time(client, system, args.rounds))
            _report(
                "GET system, today in 15m",
                _time(client, f"{system}?from={today}&to={today}&interval=15m", args.rounds),
            )
            _report(
                "GET system, 30 days of 1h (720 buckets)",
                _time(
                    client,
                    f"{system}?from={today - timedelta(days=29)}&to={today}&interval=1h",
                    args.rounds,
                ),
            )
            _report(
                "GET system, a year of 1M",
                _time(
                    client,
                    f"{system}?from={today - timedelta(days=364)}&to={today}&interval=1M",
                    args.rounds,
                ),
            )
    finally:
        proc.terminate()
        proc.wait(10)

    start = datetime(2025, 1, 1, tzinfo=UTC)
    points = [
        ChartPoint(start + timedelta(minutes=15 * i), float(i % 400) if i % 97 else None)
        for i in range(10_000)
    ]
    samples = []
    for _ in range(10):
        started = time.perf_counter()
        render_chart(points, "15m", ZoneInfo("Europe/Amsterdam"), title="bench")
        samples.append((time.perf_counter() - started) * 1000)
    _report("render_chart, 10,000 buckets (both sizes)", samples)


if __name__ == "__main__":
    main()
