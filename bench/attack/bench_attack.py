"""Benchmark: `/health` while the API is attacked, and tenant fairness on the job queue.

    .venv/bin/python bench/attack/bench_attack.py slowloris   # /health idle vs 960 half-sent heads
    .venv/bin/python bench/attack/bench_attack.py bombs       # /health and RSS vs 9.7 MB body bombs
    .venv/bin/python bench/attack/bench_attack.py reports     # a 1-day report behind 8 big CSVs
    .venv/bin/python bench/attack/bench_attack.py webhooks    # a webhook behind 100 to a silent host

A real `solarapi serve` (embedded SQLite, one worker, defaults except the rate-limit scale
and, for the fairness scenarios, the inline job runner). `/health` is polled on a new
connection each time (what a load balancer does; a new client is what an exhausted
connection table refuses). Figures are printed as one JSON line per scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fresh_database, make_account, server_process

HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: bench\r\n"
# One bomber: a bomb every time the last was answered, for 5 s; prints the statuses.
_BOMBER = """
import sys, time, httpx
bomb = b'{"readings":[' + b",".join([b"[]"] * 3_400_000) + b"]}"
url, auth = sys.argv[1], sys.argv[2]
end = time.monotonic() + 5
with httpx.Client(headers={"Authorization": auth, "Content-Type": "application/json"},
                  timeout=120) as client:
    while time.monotonic() < end:
        try:
            print(client.post(url, content=bomb).status_code)
        except httpx.HTTPError:
            print(0)
"""
BOMB = b'{"readings":[' + b",".join([b"[]"] * 3_400_000) + b"]}"
# `--pin`: the server and the /health poller run on CPU 0, the bombers on CPU 1, as when the
# attackers are other machines (on 2 cores, 4 bomber processes building 10 MB bodies otherwise
# take the server's CPU, and the figure measures the client machine, not the server).
ATTACKER_PREFIX: list[str] = []


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"n": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0)}


def _health_once(host: str, port: int) -> tuple[float, int]:
    started = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(HEAD + b"Connection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        status = 0
    return time.perf_counter() - started, status


def _poll(base: str, seconds: float) -> tuple[list[float], dict[int, int]]:
    host, port = base.removeprefix("http://").split(":")
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        elapsed, status = _health_once(host, int(port))
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            latencies.append(elapsed)
    return latencies, statuses


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _env(db: Any, **extra: str) -> dict[str, str]:
    return {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "1000", **extra}


def slowloris(sockets: int = 960, addresses: int = 16) -> dict[str, Any]:
    """`sockets` half-sent heads from `addresses` client addresses (127.0.0.x), each
    trickling a byte a second, for 20 s."""
    with fresh_database("attack", "sqlite") as db, server_process(_env(db)) as (base, _):
        host, port = base.removeprefix("http://").split(":")
        idle, _ = _poll(base, 5)
        stop = threading.Event()
        opened: list[socket.socket] = []

        def attack() -> None:
            for n in range(sockets):
                if stop.is_set():
                    break
                try:
                    sock = socket.socket()
                    sock.bind((f"127.0.1.{1 + n % addresses}", 0))
                    sock.settimeout(5)
                    sock.connect((host, int(port)))
                    sock.sendall(HEAD + b"X-Slow: ")
                    opened.append(sock)
                except OSError:
                    continue
            while not stop.wait(1.0):
                for sock in list(opened):
                    try:
                        sock.send(b"a")
                    except OSError:
                        opened.remove(sock)
                        # Reconnect: the attacker keeps the pressure on.
                        try:
                            fresh = socket.socket()
                            fresh.bind((sock.getsockname()[0], 0))
                            fresh.settimeout(5)
                            fresh.connect((host, int(port)))
                            fresh.sendall(HEAD + b"X-Slow: ")
                            opened.append(fresh)
                        except OSError:
                            pass

        attacker = threading.Thread(target=attack, daemon=True)
        attacker.start()
        time.sleep(3)  # the attack's sockets are open
        during, statuses = _poll(base, 20)
        held = len(opened)
        stop.set()
        attacker.join(10)
        for sock in opened:
            sock.close()
    return {
        "scenario": "slowloris",
        "attack_sockets": sockets,
        "open_at_end": held,
        "idle": _percentiles(idle),
        "during": _percentiles(during) if during else None,
        "statuses_during": statuses,
    }


def bombs(concurrent: int = 4, seconds: float = 20) -> dict[str, Any]:
    """`concurrent` clients sending 9.7 MB bodies of 3.4 M empty items to `POST /systems`
    and to the readings upload, back to back; RSS before, at the peak and 5 s after."""
    with fresh_database("bombs", "sqlite") as db, server_process(_env(db)) as (base, pid):
        _, keys = asyncio.run(make_account(db.settings, 1))
        headers = {"Authorization": f"Bearer {keys[0]}", "Content-Type": "application/json"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            created = client.post(
                "/api/v1/systems",
                json={
                    "name": "Bench",
                    "capacity_kwp": 10,
                    "location": {"latitude": 52, "longitude": 5, "timezone": "Europe/Amsterdam"},
                },
            )
            system_id = created.json()["id"]
        idle, _ = _poll(base, 5)
        rss_before = _rss_mb(pid)
        stop = threading.Event()
        answers: dict[int, int] = {}
        peak = [rss_before]

        def bomber(n: int) -> None:
            # A process of its own, so the bombs do not share this process's GIL with the
            # poller (its latencies would be the client's, not the server's).
            target = "/api/v1/systems" if n % 2 == 0 else f"/api/v1/systems/{system_id}/readings"
            while not stop.is_set():
                done = subprocess.run(
                    [*ATTACKER_PREFIX, sys.executable, "-c", _BOMBER, base + target,
                     headers["Authorization"]],
                    capture_output=True, text=True, timeout=300, check=False,
                )  # fmt: skip
                for status in done.stdout.split():
                    answers[int(status)] = answers.get(int(status), 0) + 1

        def watch() -> None:
            while not stop.wait(0.1):
                peak[0] = max(peak[0], _rss_mb(pid))

        threads = [threading.Thread(target=bomber, args=(n,)) for n in range(concurrent)]
        threads.append(threading.Thread(target=watch))
        for thread in threads:
            thread.start()
        during, statuses = _poll(base, seconds)
        stop.set()
        for thread in threads:
            thread.join(120)
        time.sleep(5)
        rss_after = _rss_mb(pid)
    return {
        "scenario": "body bombs",
        "bomb_bytes": len(BOMB),
        "concurrent": concurrent,
        "answers": answers,
        "idle": _percentiles(idle),
        "during": _percentiles(during) if during else None,
        "statuses_during": statuses,
        "rss_mb": {"before": rss_before, "peak": peak[0], "after_5s": rss_after},
    }


def main() -> None:
    global ATTACKER_PREFIX
    which = [arg for arg in sys.argv[1:] if arg != "--pin"] or ["slowloris", "bombs"]
    if "--pin" in sys.argv:
        os.sched_setaffinity(0, {0})  # this process (the poller) and the server it starts
        ATTACKER_PREFIX = ["taskset", "-c", "1"]
    for name in which:
        if name == "slowloris":
            print(json.dumps(slowloris()), flush=True)
        elif name == "bombs":
            print(json.dumps(bombs()), flush=True)
        elif name in ("reports", "webhooks"):
            from fairness import reports_scenario, webhooks_scenario

            scenario = reports_scenario if name == "reports" else webhooks_scenario
            print(json.dumps(scenario()), flush=True)
        else:
            raise SystemExit(f"unknown scenario {name}")


if __name__ == "__main__":
    main()
