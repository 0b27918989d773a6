"""Operator metrics: what is recorded (in this process's registry), and a real
`solarapi serve --workers 2` scraped on its operator port, where both workers' counts add up."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import REGISTRY
from sqlalchemy import delete

from solarapi.auth.keys import generate_key
from solarapi.config import Settings
from solarapi.jobs.queue import enqueue
from solarapi.jobs.repository import queue_stats
from solarapi.kit.plans import PLAN_LIMITS, Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.kit.tzdb import TZDATA_VERSION
from solarapi.kit.version import package_version
from solarapi.metrics import recorder_for
from solarapi.models.jobs import Job
from solarapi.ratelimit.policy import key_windows
from tests.reports.helpers import JUNE_1, make_system, run_report_jobs, upload_readings
from tests.support import (
    DATABASES,
    REDIS_URL,
    SERVER_START_SECONDS,
    TEST_SECRET,
    TestClock,
    client_for,
    free_port,
    make_tenant,
    migrated_settings,
    need_service,
    redis_available,
    run_cli,
    running_app,
    served,
    settings_env,
    started_worker,
)
from tests.webhooks.receiver import running_receiver
from tests.webhooks.test_delivery import create_endpoint, drain, emit


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@asynccontextmanager
async def metrics_app(
    settings: Settings, clock: TestClock, **overrides: Any
) -> AsyncIterator[FastAPI]:
    """The app with metrics on (they record into this process's default registry)."""
    changed = settings.model_copy(update={"metrics_port": free_port(), **overrides})
    async with running_app(changed, clock) as application:
        yield application


async def test_requests_are_counted_by_route_template_method_and_status(
    settings: Settings, clock: TestClock
) -> None:
    async with metrics_app(settings, clock) as app:
        tenant = await make_tenant(app, Plan.PRO)
        template = "/api/v1/systems/{system_id}"
        before = {
            "missing": sample("solarapi_http_requests_total", route=template, method="GET", status="404"),
            "health": sample("solarapi_http_requests_total", route="/api/v1/health", method="GET", status="200"),
            "unknown": sample("solarapi_http_requests_total", route="-", method="GET", status="404"),
            "other": sample("solarapi_http_requests_total", route="/api/v1/health", method="other", status="405"),
            "latency": sample("solarapi_http_request_duration_seconds_count", route=template, method="GET"),
            "dashboard": sample("solarapi_http_requests_total", route="dashboard", method="GET", status="200"),
        }  # fmt: skip
        async with client_for(app, tenant.live) as client:
            for number in range(3):
                assert (await client.get(f"/api/v1/systems/sys_missing{number}")).status_code == 404
            assert (await client.get("/api/v1/health")).status_code == 200
            assert (await client.get("/api/v1/no-such-thing")).status_code == 404
            assert (await client.request("BREW", "/api/v1/health")).status_code == 405
            assert (await client.get("/login")).status_code == 200
        after = {
            "missing": sample("solarapi_http_requests_total", route=template, method="GET", status="404"),
            "health": sample("solarapi_http_requests_total", route="/api/v1/health", method="GET", status="200"),
            "unknown": sample("solarapi_http_requests_total", route="-", method="GET", status="404"),
            "other": sample("solarapi_http_requests_total", route="/api/v1/health", method="other", status="405"),
            "latency": sample("solarapi_http_request_duration_seconds_count", route=template, method="GET"),
            "dashboard": sample("solarapi_http_requests_total", route="dashboard", method="GET", status="200"),
        }  # fmt: skip
    assert {name: after[name] - before[name] for name in before} == {
        "missing": 3,
        "health": 1,
        "unknown": 1,
        "other": 1,
        "latency": 3,
        "dashboard": 1,
    }
    # The path (with its id) is never a label: one series per template.
    assert (
        REGISTRY.get_sample_value(
            "solarapi_http_requests_total",
            {"route": "/api/v1/systems/sys_missing0", "method": "GET", "status": "404"},
        )
        is None
    )


async def test_rate_limit_refusals_by_window_and_caller(
    settings: Settings, clock: TestClock
) -> None:
    async with metrics_app(settings, clock, anonymous_per_minute=2) as app:
        pro = await make_tenant(app, Plan.PRO)
        limits = PLAN_LIMITS[Plan.PRO]
        windows = key_windows(Plan.PRO)
        bucket = f"key:{pro.key_ids[Environment.LIVE]}"
        start = (int(time.time()) // 86_400) * 86_400 + 60  # a day's first minutes
        labels = [("minute", "anonymous"), ("minute", "key"), ("day", "key")]
        before = {pair: sample("solarapi_rate_limit_refusals_total", window=pair[0], caller=pair[1]) for pair in labels}  # fmt: skip

        # Anonymous (an invalid key counts in the client IP's window): 2 allowed, then 429.
        clock.pinned = start
        async with client_for(app, "pk_live_not_a_real_key", ip="10.9.9.1") as client:
            statuses = [(await client.get("/api/v1/account")).status_code for _ in range(3)]
        assert statuses == [401, 401, 429]

        # The key's minute window, filled directly in the limiter, then one request.
        for _ in range(limits.per_minute):
            assert (await app.state.limiter.hit(bucket, windows, start)).allowed
        async with client_for(app, pro.live) as client:
            minute = await client.get("/api/v1/account")
        # The day window: filled over the day's minutes, then one request a minute later.
        used = limits.per_minute
        moment = start
        while used < limits.per_day:
            moment += 60
            for _ in range(min(limits.per_minute, limits.per_day - used)):
                assert (await app.state.limiter.hit(bucket, windows, moment)).allowed
                used += 1
        clock.pinned = moment + 60
        async with client_for(app, pro.live) as client:
            day = await client.get("/api/v1/account")
        after = {pair: sample("solarapi_rate_limit_refusals_total", window=pair[0], caller=pair[1]) for pair in labels}  # fmt: skip
    assert (minute.status_code, day.status_code) == (429, 429)
    assert "per day" in day.json()["error"] or "day" in day.json()["error"]
    assert {pair: after[pair] - before[pair] for pair in labels} == {
        ("minute", "anonymous"): 1,
        ("minute", "key"): 1,
        ("day", "key"): 1,
    }


async def test_an_unreachable_redis_is_counted_per_fallback_decision(
    settings: Settings, clock: TestClock
) -> None:
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with metrics_app(settings, clock, redis_url=dead_redis) as app:
        tenant = await make_tenant(app, Plan.PRO)
        before = sample("solarapi_rate_limiter_unavailable_total")
        async with client_for(app, tenant.live) as client:
            health = await client.get("/api/v1/health")  # one peek of the anonymous window
            account = await client.get("/api/v1/account")  # one hit of the key's windows
        after = sample("solarapi_rate_limiter_unavailable_total")
    assert health.status_code == 200
    assert account.status_code == 200
    assert after - before == 2


async def test_an_unreachable_database_is_counted(clock: TestClock, tmp_path: Path) -> None:
    closed = free_port()
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"postgresql://postgres@127.0.0.1:{closed}/nothing",
        secret_key=TEST_SECRET,
    )
    before = sample("solarapi_database_unavailable_total")
    async with (
        metrics_app(settings, clock) as app,
        client_for(app, generate_key(Environment.LIVE).key) as client,
    ):
        response = await client.get("/api/v1/account")
    assert response.status_code == 503
    assert response.json()["code"] == "unavailable"
    assert sample("solarapi_database_unavailable_total") - before == 1


async def test_webhook_deliveries_by_outcome(settings: Settings, clock: TestClock) -> None:
    outcomes = ("delivered", "retrying", "gone")
    async with metrics_app(settings, clock, webhooks_allow_loopback=True) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        # Deliveries other tests left queued in this database would run in the drains below
        # (their clocks are ahead) and count too: run them out first.
        await drain(app, timedelta(days=30))
        before = {o: sample("solarapi_webhook_deliveries_total", outcome=o) for o in outcomes}
        with running_receiver(script=[500, 200, 410]) as receiver:
            await create_endpoint(app, tenant.live, receiver.url)
            await emit(app, tenant)  # 500, then the retry gets 200
            await drain(app)
            await drain(app, timedelta(minutes=10))
            await emit(app, tenant)  # 410: the endpoint is disabled
            await drain(app, timedelta(minutes=10))
        after = {o: sample("solarapi_webhook_deliveries_total", outcome=o) for o in outcomes}
    assert len(receiver.received) == 3
    assert {o: after[o] - before[o] for o in outcomes} == {"delivered": 1, "retrying": 1, "gone": 1}


async def test_report_generation_duration_is_observed(settings: Settings, clock: TestClock) -> None:
    async with metrics_app(settings, clock) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        labels = {"type": "production", "format": "csv"}
        # Reports other tests left queued in this database would be generated (and observed)
        # by the run below: generate them first, so the count moves by this test's one.
        await run_report_jobs(app)
        count = sample("solarapi_report_generation_seconds_count", **labels)
        total = sample("solarapi_report_generation_seconds_sum", **labels)
        async with client_for(app, tenant.live) as client:
            system = await make_system(client, "Roof", "Europe/Amsterdam")
            await upload_readings(client, system, JUNE_1, 96)
            created = await client.post(
                "/api/v1/reports",
                json={"type": "production", "format": "csv", "from": "2025-06-01T00:00:00Z",
                      "to": "2025-06-02T00:00:00Z"},
            )  # fmt: skip
            assert created.status_code == 202, created.text
            assert await run_report_jobs(app) >= 1
            report = (await client.get(created.headers["location"])).json()
    assert report["status"] == "completed"
    assert sample("solarapi_report_generation_seconds_count", **labels) - count == 1
    assert sample("solarapi_report_generation_seconds_sum", **labels) > total


async def test_queue_stats_by_kind(settings: Settings, clock: TestClock) -> None:
    kind = f"metrics.test.{os.getpid()}.{time.monotonic_ns()}"
    async with metrics_app(settings, clock) as app:
        now = utcnow()
        async with app.state.sessionmaker() as session, session.begin():
            await enqueue(session, kind, {}, run_at=now - timedelta(hours=1))
            await enqueue(session, kind, {}, run_at=now - timedelta(minutes=1))
            await enqueue(session, kind, {}, run_at=now + timedelta(hours=1))
        try:
            async with app.state.sessionmaker() as session:
                stats = {item.kind: item for item in await queue_stats(session, utcnow())}
        finally:
            async with app.state.sessionmaker() as session, session.begin():
                await session.execute(delete(Job).where(Job.kind == kind))
    mine = stats[kind]
    assert (mine.due, mine.scheduled, mine.running) == (2, 1, 0)
    assert mine.oldest_due_at is not None
    age = (utcnow() - mine.oldest_due_at).total_seconds()
    assert 3600 <= age < 3600 + 600


# --- a real server ---------------------------------------------------------------------------


@contextmanager
def serve_with_metrics(env: dict[str, str], *args: str) -> Iterator[tuple[str, str]]:
    """`solarapi serve` with metrics on a free port; yields (API URL, metrics URL)."""
    metrics_port = free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    full_env = {**env, "SOLARAPI_METRICS_PORT": str(metrics_port)}
    with served(full_env, *args, ready=(metrics,)) as server:
        yield server.base, metrics


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def health_count(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    key = (
        "solarapi_http_requests_total",
        (("method", "GET"), ("route", "/api/v1/health"), ("status", "200")),
    )
    return samples.get(key, 0.0)


def per_process_health_counts(directory: Path) -> dict[str, float]:
    """Each worker's own count, read from its file in the multiprocess directory."""
    from prometheus_client.mmap_dict import MmapedDict

    counts: dict[str, float] = {}
    for path in directory.glob("counter_*.db"):
        values = MmapedDict(str(path), read_mode=True)
        try:
            for key, value, _ in values.read_all_values():
                if (
                    "solarapi_http_requests_total" in key
                    and "/api/v1/health" in key
                    and '"200"' in key
                ):
                    counts[path.stem] = counts.get(path.stem, 0.0) + value
        finally:
            values.close()
    return counts


@pytest.mark.slow
async def test_two_workers_add_up_on_the_operator_port(app: FastAPI, tmp_path: Path) -> None:
    need_service("Redis", redis_available())
    settings = app.state.settings
    directory = tmp_path / "multiproc"
    directory.mkdir()
    # A value left by an earlier run: `serve` must start from an empty directory.
    (directory / "counter_999999.db").write_bytes(b"stale")
    env = settings_env(
        settings,
        SOLARAPI_REDIS_URL=REDIS_URL,
        SOLARAPI_JOB_RUNNER="external",
        SOLARAPI_LOG_LEVEL="WARNING",
        PROMETHEUS_MULTIPROC_DIR=str(directory),
    )
    kind = f"metrics.serve.{os.getpid()}.{time.monotonic_ns()}"
    async with app.state.sessionmaker() as session, session.begin():
        await enqueue(session, kind, {}, run_at=utcnow() - timedelta(minutes=30))
    try:
        with serve_with_metrics(env, "--workers", "2") as (base, metrics):
            assert not (directory / "counter_999999.db").exists()
            before = scrape(metrics)
            sent = 0
            # Fresh connections, so the kernel hands them to both workers; until each worker
            # has served some (bounded: a worker that never serves fails the test).
            deadline = time.monotonic() + 120
            while True:
                for _ in range(20):
                    with httpx.Client(base_url=base, timeout=30) as client:
                        assert client.get("/api/v1/health").status_code == 200
                    sent += 1
                served = per_process_health_counts(directory)
                if len([c for c in served.values() if c > 0]) >= 2:
                    break
                assert time.monotonic() < deadline, f"one worker served everything: {served}"
            after = scrape(metrics)
            api_metrics = httpx.get(f"{base}/metrics", timeout=10)
            api_metrics_v1 = httpx.get(f"{base}/api/v1/metrics", timeout=10)
    finally:
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(delete(Job).where(Job.kind == kind))
    assert health_count(after) - health_count(before) == sent
    assert sum(served.values()) >= sent
    latency = ("solarapi_http_request_duration_seconds_count", (("method", "GET"), ("route", "/api/v1/health")))  # fmt: skip
    assert after[latency] - before.get(latency, 0.0) == sent
    assert after[("solarapi_metrics_database_up", ())] == 1
    assert after[("solarapi_jobs_queued", (("kind", kind),))] == 1
    # Known kinds with nothing queued are series at 0, not missing.
    assert after[("solarapi_jobs_queued", (("kind", "report.generate"),))] == 0
    assert after[("solarapi_jobs_running", (("kind", "webhook.deliver"),))] == 0
    # process_* of every process (the supervisor and both workers), by pid.
    pids = {dict(labels)["pid"] for name, labels in after if name == "process_start_time_seconds"}
    assert len(pids) >= 3, pids
    assert all(after[("process_resident_memory_bytes", (("pid", pid),))] > 0 for pid in pids)
    # Pool usage, summed over the two live workers (20 + 10 overflow each by default).
    assert after[("solarapi_db_pool_connections_max", ())] == 2 * 30
    assert 0 <= after[("solarapi_db_pool_connections_in_use", ())] <= 2 * 30
    (build,) = [labels for name, labels in after if name == "solarapi_build_info"]
    assert dict(build)["version"] == package_version()
    assert dict(build)["api_version"] == "1.0"
    assert dict(build)["tzdata"] == TZDATA_VERSION  # the IANA release, as /health says
    age = after[("solarapi_jobs_oldest_queued_age_seconds", (("kind", kind),))]
    assert 1800 <= age < 1800 + 900
    # The API's port does not serve metrics.
    assert api_metrics_v1.status_code == 404
    assert api_metrics.status_code == 404
    assert "solarapi_http_requests_total" not in api_metrics.text


def test_serve_refuses_a_metrics_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            settings_env(Settings(data_dir=tmp_path), SOLARAPI_METRICS_PORT=str(port)),
            "serve",
            "--port",
            str(free_port()),
            check=False,
            process=True,  # serve sets up process-wide logging before it binds
        )
    assert result.returncode == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr


def test_metrics_are_off_unless_a_port_is_set() -> None:
    assert Settings().metrics_port is None
    assert Settings().metrics_host == "127.0.0.1"
    assert recorder_for(Settings()) is None
    assert recorder_for(Settings(metrics_port=9464)) is not None


@pytest.fixture(params=DATABASES)
def own_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """A fresh migrated database of this test's own: a worker started on the suite's shared
    database would also run every job earlier tests left queued there (another production CSV
    report counted twice in `solarapi_report_generation_seconds`)."""
    with migrated_settings(request.param, tmp_path) as settings:
        yield settings


@pytest.fixture
async def own_app(own_settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    async with running_app(own_settings, clock) as application:
        yield application


@pytest.mark.slow
async def test_a_worker_serves_its_job_metrics_on_its_own_port(own_app: FastAPI) -> None:
    app = own_app
    enterprise = await make_tenant(app, Plan.ENTERPRISE)
    settings = app.state.settings
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Worker metrics", "Europe/Amsterdam")
        await upload_readings(client, system, JUNE_1, 96)
        created = await client.post(
            "/api/v1/reports",
            json={"type": "production", "format": "csv", "from": "2025-06-01T00:00:00Z",
                  "to": "2025-06-02T00:00:00Z"},
        )  # fmt: skip
        assert created.status_code == 202, created.text
        metrics_port = free_port()
        # The metrics port belongs to `serve`: the worker must not take it (only
        # --metrics-port counts).
        env = settings_env(settings, SOLARAPI_METRICS_PORT=str(free_port()))
        with started_worker(
            env, "--poll", "0.2", "--metrics-port", str(metrics_port), stop_seconds=60
        ) as proc:
            # A hang guard, not a speed check: a fresh worker imports the report handlers, then
            # its render process imports them again (matplotlib, reportlab) — 30-55 s each on a
            # machine at load average 10-20, where the start-up allowance alone failed once.
            deadline = time.monotonic() + 4 * SERVER_START_SECONDS
            report = created.json()
            while report["status"] in ("queued", "running"):
                assert proc.poll() is None, "the worker exited"
                assert time.monotonic() < deadline, "the report was not generated in time"
                await asyncio.sleep(0.2)
                report = (await client.get(created.headers["location"])).json()
            samples = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
    assert report["status"] == "completed", report
    count = ("solarapi_report_generation_seconds_count", (("format", "csv"), ("type", "production")))  # fmt: skip
    assert samples[count] == 1
    assert samples[("solarapi_metrics_database_up", ())] == 1
