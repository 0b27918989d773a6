"""CPU per request through the ASGI app in this process (no server, no client): the fixed cost
of the layers around every request, steadier than req/s on a shared machine.

Against a database prepared by `solarapi migrate && solarapi demo` (the Pro demo key is read
from `solarapi demo --json`):

    SOLARAPI_DATA_DIR=D SOLARAPI_DATABASE_URL=sqlite:///D/solar.db \\
        .venv/bin/python bench/foundation/request_cost.py --demo-json D/demo.json [-n 2000]

Reports, per request, the process CPU time (user + system: aiosqlite's thread included) of
`GET /health`, `GET /account`, a 1-day `1h` readings request and a 1-year `1d` one.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: harness

from harness import call_asgi
from solarapi.app import serve_app


async def main(key: str, requests: int) -> None:
    app = serve_app()
    async with app.router.lifespan_context(app):
        _, body = await call_asgi(app, key, "/api/v1/systems")
        system = json.loads(body)["data"][0]
        last = dt.date.fromisoformat(system["last_reading_at"][:10])
        day = last - dt.timedelta(days=30)
        year0 = last.replace(year=last.year - 1) + dt.timedelta(days=1)
        readings = f"/api/v1/systems/{system['id']}/readings"
        targets = {
            "/health": ("/api/v1/health", "", requests),
            "/account": ("/api/v1/account", "", requests),
            "1-day 1h": (
                readings,
                f"from={day}T00:00:00Z&to={day + dt.timedelta(days=1)}T00:00:00Z&interval=1h",
                requests,
            ),
            "1-year 1d": (
                readings,
                f"from={year0}T00:00:00%2B01:00&to={last}T00:00:00%2B01:00&interval=1d",
                max(requests // 5, 50),
            ),
        }
        for name, (path, query, count) in targets.items():
            for _ in range(50):  # warm-up
                status, body = await call_asgi(app, key, path, query)
                assert status == 200, (name, status, body[:200])
            started = time.process_time()
            for _ in range(count):
                await call_asgi(app, key, path, query)
            per_request = (time.process_time() - started) / count
            print(f"{name:10s} {per_request * 1e6:8.1f} µs CPU per request ({count} requests)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo-json", required=True, help="the output of `solarapi demo --json`")
    parser.add_argument("-n", "--requests", type=int, default=2000)
    args = parser.parse_args()
    with open(args.demo_json) as demo:
        pro = next(a for a in json.load(demo)["accounts"] if a["plan"] == "pro")
    os.environ.setdefault("SOLARAPI_RATE_LIMIT_SCALE", "100000")
    os.environ.setdefault("SOLARAPI_LOG_LEVEL", "WARNING")
    asyncio.run(main(pro["keys"]["live"], args.requests))
