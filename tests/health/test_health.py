"""/health's probe: concurrent calls share the one in flight, a finished probe is never
reused, and the gateway answers it without running the app."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from fastapi import FastAPI

from solarapi.config import Settings
from solarapi.health.service import HealthProbe
from solarapi.ratelimit.base import Decision, Window
from tests.support import TEST_SECRET, client_for, free_port, running_app


class _GatedLimiter:
    """A limiter whose health check waits for the test, counting how often it was asked."""

    def __init__(self) -> None:
        self.checks = 0
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def check(self) -> str:
        self.checks += 1
        self.asked.set()
        await self.release.wait()
        return "ok"

    async def hit(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        raise AssertionError("the probe never counts")

    async def peek(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        raise AssertionError("the probe never counts")

    async def close(self) -> None:
        return None


async def test_concurrent_calls_share_one_probe_and_a_finished_one_is_not_reused(
    app: FastAPI,
) -> None:
    limiter = _GatedLimiter()
    probe = HealthProbe(app.state.engine, limiter)
    waiting = [asyncio.ensure_future(probe.checks()) for _ in range(5)]
    # The first caller started the probe; the other four joined it before it ran.
    await asyncio.wait_for(limiter.asked.wait(), 30)
    assert limiter.checks == 1
    limiter.release.set()
    answers = await asyncio.gather(*waiting)
    assert {(a.database, a.rate_limiter) for a in answers} == {("ok", "ok")}
    # The next call after the probe finished asks again.
    again = await probe.checks()
    assert (again.status, limiter.checks) == ("ok", 2)


async def test_a_caller_that_goes_away_does_not_cancel_the_others_probe(app: FastAPI) -> None:
    limiter = _GatedLimiter()
    probe = HealthProbe(app.state.engine, limiter)
    leaving = asyncio.ensure_future(probe.checks())
    staying = asyncio.ensure_future(probe.checks())
    await asyncio.wait_for(limiter.asked.wait(), 30)
    leaving.cancel()
    limiter.release.set()
    assert (await staying).status == "ok"
    assert leaving.cancelled()


async def test_head_health_has_the_headers_and_no_body(app: FastAPI) -> None:
    async with client_for(app) as client:
        response = await client.head("/api/v1/health")
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-request-id"].startswith("req_")
    assert int(response.headers["x-ratelimit-limit"]) == 60


class _DeadLimiter(_GatedLimiter):
    """A rate-limit store that fails every call: what Redis gone away looks like, at worst."""

    async def check(self) -> str:
        raise ConnectionError("the limiter's store is gone")

    async def hit(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        raise ConnectionError("the limiter's store is gone")

    async def peek(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        raise ConnectionError("the limiter's store is gone")


async def test_live_answers_while_the_database_and_the_limiter_do_not(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/nothing",
        secret_key=TEST_SECRET,
    )
    dead = _DeadLimiter()
    async with running_app(settings, limiter=dead) as app, client_for(app) as client:  # type: ignore[arg-type]
        for method in ("GET", "HEAD"):
            live = await client.request(method, "/api/v1/health/live")
            assert live.status_code == 200
            assert live.headers["cache-control"] == "no-store"
            assert live.headers["api-version"] == "1.0"
            assert "x-ratelimit-limit" not in live.headers  # no window was consulted
        assert live.content == b""
        assert (await client.get("/api/v1/health/live")).json() == {"status": "ok"}


async def test_live_is_never_counted(app: FastAPI) -> None:
    limit = app.state.settings.anonymous_per_minute
    async with client_for(app) as client:
        for _ in range(limit + 5):
            assert (await client.get("/api/v1/health/live")).status_code == 200
        counted = await client.get("/api/v1/openapi.json")
    assert counted.status_code == 200
    assert counted.headers["x-ratelimit-remaining"] == str(limit - 1)
