"""API reads during a burst of 30 log-ins, through HTTP against a real `solarapi serve`
(issue 28 item 4: before the fix a 30-log-in burst slowed API reads ×10, because Argon2 held
every thread of the default pool that the sandbox model needs).

Usage: .venv/bin/python bench/dashboard/bench_login_burst.py [--bursts 5]

One server on a fresh SQLite database; 30 accounts with a password; one sandbox key. A reader
asks, every ~10 ms, for sandbox readings of a different day each time (`interval=1h`: the
physical model runs in the default thread pool, nothing is kept between requests), first
alone, then while 30 clients log in at once (correct passwords, so every one runs Argon2 at
the product's cost), `--bursts` times. Prints the reader's median and p95 latency idle and
during the bursts, and the bursts' own durations.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fresh_database, server_process
from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow

PASSWORD = "bench password 123"
ACCOUNTS = 30
# The reader pauses between reads (~100 reads/s at most): a busy API, not one saturated by the
# benchmark's own reader, which would leave log-ins no CPU at all at a lower priority.
PAUSE = 0.01


async def _accounts(settings: Settings) -> tuple[list[str], str]:
    from solarapi.accounts.service import create_account
    from solarapi.auth.service import create_key
    from solarapi.db import create_oneshot_engine, sessionmaker_for

    engine = create_oneshot_engine(settings)
    emails = [f"burst-{i}@example.com" for i in range(ACCOUNTS)]
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            first = None
            for email in emails:
                made = await create_account(
                    session, name="Burst", email=email, password=PASSWORD,
                    plan=Plan.ENTERPRISE, now=utcnow(),
                )  # fmt: skip
                first = first or made.account.id
            assert first is not None
            _, key = await create_key(
                session, account_id=first, name="reader", environment=Environment.TEST,
                secret=settings.effective_secret_key, now=utcnow(),
            )  # fmt: skip
    finally:
        await engine.dispose()
    return emails, key.key


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, round(len(ordered) * 0.95) - 1)]


async def _reader(client: httpx.AsyncClient, system_id: str, stop: asyncio.Event, day: list[int]):
    out: list[float] = []
    while not stop.is_set():
        start = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=day[0])
        day[0] += 1
        params = {
            "from": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "to": (start + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "interval": "1h",
        }
        started = time.perf_counter()
        answer = await client.get(f"/api/v1/systems/{system_id}/readings", params=params)
        out.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text
        await asyncio.sleep(PAUSE)
    return out


async def _log_in(base: str, email: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        page = await client.get("/login")
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, "no CSRF field on the log-in page"
        answer = await client.post(
            "/login",
            data={"email": email, "password": PASSWORD, "csrf": found.group(1)},
            headers={"Origin": base},
        )
        assert answer.status_code in (302, 303), (answer.status_code, answer.text[:300])


async def _run(base: str, key: str, emails: list[str], bursts: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client:
        systems = (await client.get("/api/v1/systems")).json()["data"]
        system_id = systems[0]["id"]
        day = [0]
        idle: list[float] = []
        during: list[float] = []
        took: list[float] = []
        for _ in range(bursts):
            stop = asyncio.Event()
            reader = asyncio.create_task(_reader(client, system_id, stop, day))
            await asyncio.sleep(3)
            stop.set()
            idle += await reader
            stop = asyncio.Event()
            reader = asyncio.create_task(_reader(client, system_id, stop, day))
            started = time.perf_counter()
            await asyncio.gather(*(_log_in(base, email) for email in emails))
            took.append(time.perf_counter() - started)
            stop.set()
            during += await reader
    print(f"load average at the end: {os.getloadavg()}")
    print(
        f"reads idle:   n={len(idle)} median {statistics.median(idle):.1f} ms p95 {_p95(idle):.1f} ms"
    )
    print(
        f"reads during: n={len(during)} median {statistics.median(during):.1f} ms "
        f"p95 {_p95(during):.1f} ms"
    )
    print(f"ratio median {statistics.median(during) / statistics.median(idle):.2f}, "
          f"p95 {_p95(during) / _p95(idle):.2f}")  # fmt: skip
    print(f"30 log-ins took {', '.join(f'{t:.1f}' for t in took)} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bursts", type=int, default=5)
    args = parser.parse_args()
    with fresh_database("login-burst", "sqlite") as db:
        emails, key = asyncio.run(_accounts(db.settings))
        env = {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "1000"}
        with server_process(env) as (base, _):
            asyncio.run(_run(base, key, emails, args.bursts))


if __name__ == "__main__":
    main()
