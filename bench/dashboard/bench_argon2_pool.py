"""Default-pool latency (what the sandbox model and DNS lookups need) during a burst of 30
Argon2 verifications at the product's cost: on the default pool, as log-ins ran before
issue 28, against Argon2's own bounded pool (`accounts.passwords`). Run:
`.venv/bin/python bench/dashboard/bench_argon2_pool.py`."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from solarapi.accounts import passwords


async def probe_latencies(stop: asyncio.Event) -> list[float]:
    out: list[float] = []
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.to_thread(lambda: None)
        out.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.005)
    return out


async def run(burst: Callable[[], Awaitable[None]]) -> None:
    stop = asyncio.Event()
    probe = asyncio.create_task(probe_latencies(stop))
    await burst()
    stop.set()
    lat = sorted(await probe)
    print(
        f"  default-pool hop: median {statistics.median(lat):.2f} ms, "
        f"max {lat[-1]:.1f} ms, n={len(lat)}"
    )


async def before() -> None:
    await asyncio.gather(*(asyncio.to_thread(passwords._verify, None, "wrong") for _ in range(30)))


async def after() -> None:
    await asyncio.gather(*(passwords.verify_password(None, "wrong") for _ in range(30)))


if __name__ == "__main__":
    passwords._dummy_hash()
    for name, burst in (("default pool (before)", before), ("own pool (after)", after)) * 2:
        print(name)
        asyncio.run(run(burst))
