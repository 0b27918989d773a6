"""Benchmark: what events, webhooks and Idempotency-Key cost a write, and how fast deliveries go.

    .venv/bin/python bench/webhooks/bench_webhooks.py [--backend sqlite|postgres|both]
                                                     [--runs 50] [--events 300]

Part 1, through HTTP against a real `solarapi serve` (job runner external, so deliveries do
not run in the server): `POST /systems` — which writes the system and its `system.created`
event in one transaction —
  - plain (baseline),
  - with a fresh Idempotency-Key (the key row is inserted and committed before, and the
    response stored after: two extra short transactions),
  - replayed (the same key again: one lookup, no endpoint),
  - with 20 enabled webhook endpoints subscribed (20 delivery jobs queued in the transaction).
Each case has its own API key (and so its own 300/minute window).

Part 2, in process: `--events` events for one endpoint whose receiver is a local HTTP server
on 127.0.0.1 answering 200; the deliveries are run by the job runner's `run_pending` (one job
after the other, as one runner slot does) and by a `JobRunner` with 4 slots (the default of
`solarapi worker`). Reported as deliveries per second, each signed and recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from sqlalchemy import text

from solarapi.config import Settings
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import fresh_database, make_account, serving

SYSTEM = {
    "name": "Bench roof",
    "capacity_kwp": 8.0,
    "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
}
CASES = ("plain", "idempotency key", "replay", "20 webhooks")


def timed(action: Callable[[], httpx.Response], expect: int) -> float:
    began = time.perf_counter()
    response = action()
    _ = response.content
    elapsed = (time.perf_counter() - began) * 1000
    if response.status_code != expect:
        raise RuntimeError(f"{response.status_code}: {response.text}")
    return elapsed


def measure(client: httpx.Client, case: str, runs: int) -> list[float]:
    times: list[float] = []
    post = partial(client.post, "/api/v1/systems", json=SYSTEM)
    if case == "replay":
        key = str(uuid.uuid4())
        post(headers={"Idempotency-Key": key}).raise_for_status()
        for _ in range(runs):
            times.append(timed(partial(post, headers={"Idempotency-Key": key}), 201))
        return times
    for _ in range(runs):
        if case == "idempotency key":
            times.append(timed(partial(post, headers={"Idempotency-Key": str(uuid.uuid4())}), 201))
        else:
            times.append(timed(post, 201))
    return times


def http_part(backend: str, env: dict[str, str], settings: Settings, runs: int) -> None:
    _, plain_keys = asyncio.run(make_account(settings, 3))
    _, hook_keys = asyncio.run(make_account(settings, 1))
    with serving(env) as base:
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {hook_keys[0]}"}, timeout=60
        ) as setup:
            for i in range(20):
                setup.post(
                    "/api/v1/webhooks",
                    json={
                        "url": f"https://hook-{i}.example.invalid/",
                        "events": ["system.created"],
                    },
                ).raise_for_status()
        results: dict[str, list[float]] = {}
        for case, key in zip(CASES, [*plain_keys, hook_keys[0]], strict=True):
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as client:
                measure(client, case, 5)  # warm-up
                results[case] = sorted(measure(client, case, runs))
        baseline = statistics.median(results["plain"])
        for case, times in results.items():
            median = statistics.median(times)
            p95 = times[max(0, math.ceil(len(times) * 0.95) - 1)]
            print(
                f"{backend:8} POST /systems, {case:16} median {median:6.1f} ms  p95 {p95:6.1f} ms"
                f"  (+{median - baseline:5.1f} ms vs plain, n={runs})",
                flush=True,
            )


class _Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do
    count = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        type(self).count += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


async def delivery_part(backend: str, settings: Settings, events: int) -> None:
    import solarapi.webhooks.jobs  # noqa: F401 - registers the handler
    from solarapi.auth.principal import Caller
    from solarapi.db import create_engine, sessionmaker_for
    from solarapi.events.service import record_event
    from solarapi.events.types import DELIVERY_JOB_KIND as JOB_KIND
    from solarapi.jobs.runner import JobRunner, load_handlers, run_pending
    from solarapi.webhooks.schemas import WebhookCreate
    from solarapi.webhooks.service import WebhookConfig, create_endpoint

    load_handlers()  # imported once up front (reports pull in matplotlib), not timed
    _Receiver.count = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    loopback = settings.model_copy(update={"webhooks_allow_loopback": True})
    engine = create_engine(loopback)
    maker = sessionmaker_for(engine, loopback)
    account_id, _ = await make_account(settings, 1)
    owner = Caller(account_id, Environment.LIVE)
    async with maker() as session, session.begin():
        await create_endpoint(
            session, owner, WebhookCreate(url=url, events=["system.created"]),
            WebhookConfig.from_settings(loopback), utcnow(),
        )  # fmt: skip

    async def emit(count: int) -> None:
        async with maker() as session, session.begin():
            for i in range(count):
                await record_event(
                    session, account_id=account_id, environment=Environment.LIVE,
                    event_type="system.created", data={"id": f"sys_{i}", "name": "Bench roof"},
                )  # fmt: skip

    # Part 1's endpoints point at hosts that do not resolve: their queued jobs are not ours.
    async with maker() as session, session.begin():
        await session.execute(
            text("UPDATE jobs SET status = 'cancelled' WHERE kind = :kind AND status = 'queued'"),
            {"kind": JOB_KIND},
        )
    try:
        await emit(events)
        began = time.perf_counter()
        ran = await run_pending(maker, "bench", kinds={JOB_KIND})
        elapsed = time.perf_counter() - began
        print(
            f"{backend:8} deliveries, run_pending (1 slot)   {ran / elapsed:7.1f} /s"
            f"  ({ran} in {elapsed:.2f} s, receiver got {_Receiver.count})",
            flush=True,
        )
        _Receiver.count = 0
        await emit(events)
        runner = JobRunner(maker, worker_id="bench-runner", concurrency=4, poll_seconds=0.05)
        began = time.perf_counter()
        runner.start()
        while _Receiver.count < events:  # noqa: ASYNC110 - the receiver is another thread
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - began
        await runner.stop()
        print(
            f"{backend:8} deliveries, JobRunner (4 slots)    {events / elapsed:7.1f} /s"
            f"  ({events} in {elapsed:.2f} s)",
            flush=True,
        )
    finally:
        server.shutdown()
        await engine.dispose()


def run_backend(backend: str, runs: int, events: int) -> None:
    with fresh_database("webhooks", backend) as db:
        http_part(backend, db.env, db.settings, runs)
        asyncio.run(delivery_part(backend, db.settings, events))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--events", type=int, default=300)
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        run_backend(backend, args.runs, args.events)


if __name__ == "__main__":
    main()
