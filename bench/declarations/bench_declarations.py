"""Benchmark: declaration create (1 month, 1 year), submit and list through HTTP against a
real `solarapi serve`, on SQLite and on PostgreSQL.

    .venv/bin/python bench/declarations/bench_declarations.py [--backend sqlite|postgres|both]
                                                             [--runs 30]

Setup (not timed): a fresh database, one Enterprise account with one live key per measured
case (each key has its own 300/minute window), one Amsterdam system with a year of 15-minute
readings uploaded through the API. Every timed create computes the metered energy and
coverage from the readings, takes the system's declaration lock and checks the overlap rule;
the declaration is deleted again (untimed) so the next create does not overlap it.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import fresh_database, make_account, serving, upload_a_year

YEAR_START = datetime(2024, 12, 31, 23, tzinfo=UTC)  # 2025-01-01 00:00 in Amsterdam
YEAR_END = datetime(2025, 12, 31, 23, tzinfo=UTC)
CASES = ("create, 1 month", "create, 1 year", "submit, 1 month", "list, first 50")


def make_system_with_a_year(client: httpx.Client) -> str:
    created = client.post(
        "/api/v1/systems",
        json={
            "name": "Bench roof", "capacity_kwp": 8.0,
            "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
        },
    )  # fmt: skip
    created.raise_for_status()
    system_id = str(created.json()["id"])
    upload_a_year(client, system_id, YEAR_START, YEAR_END)
    return system_id


def timed(action: Callable[[], httpx.Response], expect: int) -> tuple[float, httpx.Response]:
    began = time.perf_counter()
    response = action()
    _ = response.content
    elapsed = (time.perf_counter() - began) * 1000
    if response.status_code != expect:
        raise RuntimeError(f"{response.status_code}: {response.text}")
    return elapsed, response


def measure(client: httpx.Client, case: str, system_id: str, runs: int) -> list[float]:
    month = {"period_start": "2025-05-01", "period_end": "2025-05-31"}
    year = {"period_start": "2025-01-01", "period_end": "2025-12-31"}
    body = {"system_id": system_id, "type": "guarantee_of_origin"}
    times: list[float] = []
    if case == "list, first 50":
        listed = client.get("/api/v1/declarations").json()["pagination"]["total"]
        for m in range(60 if listed < 60 else 0):
            day = f"2025-{m // 28 + 1:02d}-{m % 28 + 1:02d}"
            client.post(
                "/api/v1/declarations",
                json={**body, "type": "feed_in", "period_start": day, "period_end": day},
            ).raise_for_status()
        for _ in range(runs):
            times.append(timed(partial(client.get, "/api/v1/declarations"), 200)[0])
        return times
    for _ in range(runs):
        if case.startswith("create"):
            period = month if case == "create, 1 month" else year
            elapsed, created = timed(
                partial(client.post, "/api/v1/declarations", json={**body, **period}), 201
            )
            times.append(elapsed)
            client.delete(f"/api/v1/declarations/{created.json()['id']}").raise_for_status()
        else:
            draft = client.post(
                "/api/v1/declarations", json={**body, "type": "production_subsidy", **month}
            )
            draft.raise_for_status()
            path = f"/api/v1/declarations/{draft.json()['id']}"
            times.append(timed(partial(client.post, f"{path}/submit"), 200)[0])
            client.post(f"{path}/withdraw").raise_for_status()
    return times


def run_backend(backend: str, runs: int) -> None:
    with fresh_database("declarations", backend) as db:
        _, keys = asyncio.run(make_account(db.settings, 1 + len(CASES)))
        with serving(db.env) as base:
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {keys[0]}"}, timeout=60
            ) as setup:
                system_id = make_system_with_a_year(setup)
            for case, key in zip(CASES, keys[1:], strict=True):
                with httpx.Client(
                    base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
                ) as client:
                    measure(client, case, system_id, 3)  # warm-up
                    times = sorted(measure(client, case, system_id, runs))
                    print(
                        f"{backend:8} {case:18} median {statistics.median(times):6.1f} ms"
                        f"  p95 {times[max(0, math.ceil(len(times) * 0.95) - 1)]:6.1f} ms  (n={runs})",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        run_backend(backend, args.runs)


if __name__ == "__main__":
    main()
