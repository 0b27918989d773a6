"""CPU per request of the hot reads, in-process: the ASGI app called directly (no sockets, no
HTTP parser, no load generator), so the figure is this process's own work per request —
the whole middleware stack, authentication, the rate limiter, the readings query and its
rendering — and holds up on a busy machine far better than a req/s figure does.

Run from the project root against a database prepared by `solarapi demo` (the key: the
Pro account's live key from `solarapi demo --json`):

    SOLARAPI_DATABASE_URL=sqlite:///D/solar.db SOLARAPI_DATA_DIR=D \\
        .venv/bin/python bench/readings/request_cpu.py pk_live_…

It asks for what a dashboard asks: `GET /health`, one day of `1h` (24 buckets) a month
before the system's last reading, and the year before it in `1d` (365 buckets, the
system's local calendar). Thread CPU per request, best of ROUNDS rounds of N requests. Each
readings request is measured twice: "kept", answered from what the app kept while the
database was unchanged (docs/foundation.md), and "read afresh", as the first request after
a commit (the kept values dropped before each request; the clearing is inside the timing and
costs well under a microsecond).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: harness

from harness import call_asgi
from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.readings import router as readings_router

N = int(os.environ.get("N", "1000"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))


async def main(key: str) -> None:
    os.environ.setdefault("SOLARAPI_RATE_LIMIT_SCALE", "100000")  # never a 429
    os.environ.setdefault("SOLARAPI_LOG_LEVEL", "WARNING")
    app = create_app(Settings())
    async with app.router.lifespan_context(app):
        status, body = await call_asgi(app, key, "/api/v1/systems")
        assert status == 200, body
        system = json.loads(body)["data"][0]
        last = dt.date.fromisoformat(system["last_reading_at"][:10])
        day = last - dt.timedelta(days=30)
        year0 = last.replace(year=last.year - 1) + dt.timedelta(days=1)
        readings = f"/api/v1/systems/{system['id']}/readings"
        cases = {
            "GET /health": ("/api/v1/health", ""),
            "1-day 1h": (
                readings,
                f"from={day}T00:00:00Z&to={day + dt.timedelta(days=1)}T00:00:00Z&interval=1h",
            ),
            "1-year 1d": (
                readings,
                f"from={year0}T00:00:00%2B01:00&to={last}T00:00:00%2B01:00&interval=1d",
            ),
        }
        for name, (path, query) in cases.items():
            for afresh in (False, True) if path == readings else (False,):
                for _ in range(50):  # warm: caches, prepared statements, the pool
                    status, body = await call_asgi(app, key, path, query)
                assert status == 200, body
                best = float("inf")
                for _ in range(ROUNDS):
                    start = time.thread_time()
                    for _ in range(N):
                        if afresh:  # as the first request after a commit: nothing kept
                            forget(app)
                        await call_asgi(app, key, path, query)
                    best = min(best, (time.thread_time() - start) / N)
                label = (
                    f"{name} ({'read afresh' if afresh else 'kept'})" if path == readings else name
                )
                print(f"{label:24s} {best * 1e6:6.0f} µs of CPU per request  ({len(body):,} bytes)")


def forget(app: Any) -> None:
    """Drop what the app keeps while the database is unchanged (`kit.versioned`)."""
    app.state.principals.clear()
    readings_router._BODIES.clear()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
