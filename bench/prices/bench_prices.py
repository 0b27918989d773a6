"""Benchmark: a year of `1h` prices for one zone and a year of `1d` market value for one
system, through HTTP against a real `solarapi serve`, on SQLite and on PostgreSQL.

    .venv/bin/python bench/prices/bench_prices.py [--backend sqlite|postgres|both] [--runs 40]

Setup (not timed): a fresh database, one Enterprise account, a year of NL prices (hourly
before 2025-10-01, quarter-hourly after, as the market published them), one system in NL
with a year of 15-minute readings uploaded through the API.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from solarapi.config import Settings
from solarapi.kit.timefmt import utcnow
from solarapi.kit.zones import ZONES
from solarapi.prices.price_rows import ParsedPrices, PriceRow
from solarapi.prices.service import import_prices

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import fresh_database, make_account, serving, upload_a_year

YEAR_START = datetime(2025, 3, 1, tzinfo=UTC)
YEAR_END = datetime(2026, 3, 1, tzinfo=UTC)
SWITCH = datetime(2025, 9, 30, 22, tzinfo=UTC)  # first 15-minute day-ahead delivery day


def price_rows() -> list[PriceRow]:
    rows: list[PriceRow] = []
    t = int(YEAR_START.timestamp())
    end = int(YEAR_END.timestamp())
    switch = int(SWITCH.timestamp())
    while t < end:
        step = 3600 if t < switch else 900
        hour = (t % 86400) / 3600
        day = t // 86400
        price = (
            80
            + 30 * math.sin((hour - 7) / 24 * 2 * math.pi)
            - 60 * math.exp(-((hour - 12) ** 2) / 6)
        )
        price += 15 * math.cos(day / 365 * 2 * math.pi)
        rows.append(PriceRow(t, step, round(price, 2)))
        t += step
    return rows


async def setup(settings: Settings) -> str:
    """A year of NL prices and an Enterprise account; returns its live key."""
    from solarapi.db import create_oneshot_engine, sessionmaker_for

    engine = create_oneshot_engine(settings)
    async with sessionmaker_for(engine)() as session, session.begin():
        await import_prices(session, ParsedPrices(ZONES["NL"], "entsoe", price_rows()), utcnow())
    await engine.dispose()
    _, keys = await make_account(settings, 1)
    return keys[0]


def upload_readings(client: httpx.Client) -> str:
    created = client.post(
        "/api/v1/systems",
        json={
            "name": "Bench roof", "capacity_kwp": 8.0, "market_zone": "NL",
            "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
        },
    )  # fmt: skip
    created.raise_for_status()
    system_id = str(created.json()["id"])
    upload_a_year(client, system_id, YEAR_START, YEAR_END)
    return system_id


def timed(client: httpx.Client, url: str, params: dict[str, str], runs: int) -> list[float]:
    for _ in range(3):  # warm-up
        client.get(url, params=params).raise_for_status()
    times: list[float] = []
    for _ in range(runs):
        began = time.perf_counter()
        response = client.get(url, params=params)
        response.raise_for_status()
        _ = response.content
        times.append((time.perf_counter() - began) * 1000)
    return times


def run_backend(backend: str, runs: int, keep: bool = False) -> None:
    with fresh_database("prices", backend, keep=keep) as db:
        key = asyncio.run(setup(db.settings))
        with serving(db.env) as base:
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                system_id = upload_readings(client)
                year = {"from": "2025-03-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}
                cases = [
                    ("a year of 1h prices (8,760 buckets)", "/api/v1/market-prices", {**year, "zone": "NL", "interval": "1h"}),
                    ("a year of 1d market value (365 buckets)", f"/api/v1/systems/{system_id}/market-value", {**year, "interval": "1d"}),
                ]  # fmt: skip
                for label, url, params in cases:
                    for encoding in ("gzip", "identity"):
                        client.headers["Accept-Encoding"] = encoding
                        times = timed(client, url, params, runs)
                        print(
                            f"{backend:8} {label:42} {encoding:8} median {statistics.median(times):6.1f} ms"
                            f"  p95 {sorted(times)[int(len(times) * 0.95) - 1]:6.1f} ms  (n={runs})"
                        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--keep", action="store_true", help="keep the databases for profiling")
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        run_backend(backend, args.runs, args.keep)


if __name__ == "__main__":
    main()
