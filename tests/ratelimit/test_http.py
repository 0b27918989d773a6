"""Rate limits over HTTP with the injectable clock: the 61st request, refused requests,
window resets, the minute/day interplay, the anonymous window and trusted proxies."""

from __future__ import annotations

import time

import httpx
from fastapi import FastAPI

from solarapi.kit.plans import Environment, Plan
from solarapi.ratelimit.policy import key_windows
from tests.support import (
    Tenant,
    TestClock,
    assert_common_headers,
    assert_error,
    client_for,
    make_tenant,
    running_app,
    settings_like,
)

ACCOUNT = "/api/v1/account"
DAY = 86_400


def minute_start() -> float:
    return float(int(time.time()) // 60 * 60)


def limit_headers(response: httpx.Response) -> tuple[int, int, int]:
    h = response.headers
    return int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), int(h["x-ratelimit-reset"])


async def test_61st_pro_request_in_a_minute_is_refused(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    start = minute_start()
    clock.pinned = start + 10.2
    async with client_for(app, pro.live) as client:
        for n in range(1, 61):
            response = await client.get(ACCOUNT)
            assert response.status_code == 200, n
            assert limit_headers(response) == (60, 60 - n, int(start) + 60)
            assert response.headers["x-ratelimit-remaining-day"] == str(10_000 - n)
            assert response.headers["ratelimit"] == f'"minute";r={60 - n};t=50'
        refused = await client.get(ACCOUNT)
    body = assert_error(refused, 429, "rate_limit")
    assert body["error"] == "Rate limit exceeded: 60 requests per minute. Retry in 50 s."
    assert refused.headers["retry-after"] == "50"
    assert limit_headers(refused) == (60, 0, int(start) + 60)
    assert refused.headers["x-ratelimit-remaining-day"] == str(10_000 - 60)


async def test_refused_requests_count_in_neither_window(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    start = minute_start()
    clock.pinned = start + 1
    async with client_for(app, pro.live) as client:
        for _ in range(60):
            await client.get(ACCOUNT)
        for _ in range(15):
            assert (await client.get(ACCOUNT)).status_code == 429
        clock.pinned = start + 59.999
        assert (await client.get(ACCOUNT)).status_code == 429
        clock.pinned = start + 60
        body = (await client.get(ACCOUNT)).json()
    assert body["usage"] == {"minute": 1, "today": 61}


async def test_requests_past_the_scope_check_count(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    # Order of checks: the key's window is counted before the 403.
    clock.pinned = minute_start() + 1
    async with client_for(app, pro.live) as client:
        forbidden = await client.post("/api/v1/systems", json={})
        account = (await client.get(ACCOUNT)).json()
    assert forbidden.status_code == 403
    assert forbidden.headers["x-ratelimit-remaining-minute"] == "59"
    assert account["usage"]["minute"] == 2


async def test_retry_after_rounds_up(app: FastAPI, enterprise: Tenant, clock: TestClock) -> None:
    start = minute_start()
    clock.pinned = start + 1
    async with client_for(app, enterprise.live) as client:
        for _ in range(300):
            await client.get(ACCOUNT)
        clock.pinned = start + 59.5
        late = await client.get(ACCOUNT)
        clock.pinned = start + 0.25 + 1
        early = await client.get(ACCOUNT)
    assert late.headers["retry-after"] == "1"
    assert early.headers["retry-after"] == "59"
    assert "300 requests per minute" in late.json()["error"]


async def _prefill_day(app: FastAPI, tenant: Tenant, used: int, day_start: float) -> None:
    """Count `used` requests earlier today through the limiter itself (60 a minute)."""
    windows = key_windows(tenant.plan)
    bucket = f"key:{tenant.key_ids[Environment.LIVE]}"
    for n in range(used):
        decision = await app.state.limiter.hit(bucket, windows, day_start + 60 * (n // 60) + 1)
        assert decision.allowed


async def test_day_window_binds_and_resets_at_midnight(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    day_start = float(int(time.time()) // DAY * DAY)
    await _prefill_day(app, pro, 9_990, day_start)
    later = day_start + 5 * 3600
    clock.pinned = later
    async with client_for(app, pro.live) as client:
        for n in range(1, 11):
            response = await client.get(ACCOUNT)
            assert response.status_code == 200
            # Fewer left in the day than in the minute: the day binds.
            assert limit_headers(response) == (10_000, 10 - n, int(day_start) + DAY)
            assert response.headers["x-ratelimit-remaining-minute"] == str(60 - n)
        refused = await client.get(ACCOUNT)
        assert_error(refused, 429, "rate_limit")
        assert "10000 requests per day" in refused.json()["error"]
        assert refused.headers["retry-after"] == str(DAY - 5 * 3600)
        # A fresh minute does not help while the day is used up.
        clock.pinned = later + 120
        still = await client.get(ACCOUNT)
        assert still.status_code == 429
        assert still.headers["x-ratelimit-remaining-minute"] == "60"
        clock.pinned = day_start + DAY
        next_day = await client.get(ACCOUNT)
    assert next_day.status_code == 200
    assert next_day.json()["usage"] == {"minute": 1, "today": 1}
    assert limit_headers(next_day)[:2] == (60, 59)


async def test_tie_goes_to_the_window_that_resets_later(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    day_start = float(int(time.time()) // DAY * DAY)
    await _prefill_day(app, pro, 9_940, day_start)
    clock.pinned = day_start + 6 * 3600
    async with client_for(app, pro.live) as client:
        response = await client.get(ACCOUNT)
    # 59 left in the minute and 59 in the day.
    assert response.headers["x-ratelimit-remaining-minute"] == "59"
    assert response.headers["x-ratelimit-remaining-day"] == "59"
    assert limit_headers(response) == (10_000, 59, int(day_start) + DAY)


async def test_anonymous_window_per_ip(
    app: FastAPI, starter: Tenant, pro: Tenant, clock: TestClock
) -> None:
    start = minute_start()
    clock.pinned = start + 5
    ip = "10.200.0.1"
    async with (
        client_for(app, ip=ip) as anonymous,
        client_for(app, starter.live, ip=ip) as starter_client,
    ):
        for n in range(30):
            assert (await anonymous.get(ACCOUNT)).status_code == 401
            forbidden = await starter_client.get(ACCOUNT)
            assert forbidden.status_code == 403
            assert limit_headers(forbidden) == (60, 60 - 2 * (n + 1), int(start) + 60)
        refused = await anonymous.get(ACCOUNT)
        refused_starter = await starter_client.get(ACCOUNT)
        # Health is never refused and does not count; it shows the IP's window.
        health = [await anonymous.get("/api/v1/health") for _ in range(5)]
        openapi = await anonymous.get("/api/v1/openapi.json")
    for response in (refused, refused_starter):
        body = assert_error(response, 429, "rate_limit")
        # The Starter key is valid: the message names why it counts here, not "invalid key".
        assert body["error"] == (
            "Rate limit exceeded: 60 requests per minute from this address without a usable "
            "API key (missing, invalid or revoked, or a Starter plan's key, which has no API "
            "access). Retry in 55 s."
        )
        assert response.headers["retry-after"] == "55"
    assert all(h.status_code == 200 for h in health)
    assert all(h.headers["x-ratelimit-remaining"] == "0" for h in health)
    assert openapi.status_code == 429
    # Another IP has its own window; a Pro key from the exhausted IP is not affected.
    async with client_for(app, ip="10.200.0.2") as other:
        assert (await other.get(ACCOUNT)).status_code == 401
    async with client_for(app, pro.live, ip=ip) as keyed:
        assert (await keyed.get(ACCOUNT)).status_code == 200
    clock.pinned = start + 60
    async with client_for(app, ip=ip) as anonymous:
        assert (await anonymous.get(ACCOUNT)).status_code == 401


async def test_health_is_not_counted(app: FastAPI, clock: TestClock) -> None:
    clock.pinned = minute_start() + 1
    async with client_for(app, ip="10.201.0.1") as client:
        for _ in range(100):
            response = await client.get("/api/v1/health")
            assert response.status_code == 200
            assert_common_headers(response)
            assert response.headers["x-ratelimit-remaining"] == "60"
        assert (await client.get("/api/v1/openapi.json")).headers["x-ratelimit-remaining"] == "59"


async def test_forwarded_for_only_from_trusted_proxies(app: FastAPI, clock: TestClock) -> None:
    clock.pinned = minute_start() + 1
    proxied = settings_like(app.state.settings, trusted_proxies=["10.0.0.0/8", "fd00::/8"])
    async with running_app(proxied, clock) as proxy_app:

        async def remaining(peer: str, forwarded: str | None) -> int:
            headers = {"X-Forwarded-For": forwarded} if forwarded else {}
            async with client_for(proxy_app, ip=peer) as client:
                response = await client.get(ACCOUNT, headers=headers)
            assert response.status_code in (401, 429)
            return int(response.headers["x-ratelimit-remaining"])

        # Behind the trusted proxy, each client has its own window.
        assert await remaining("10.0.0.2", "198.51.100.7") == 59
        assert await remaining("10.0.0.3", "198.51.100.7") == 58
        assert await remaining("10.0.0.2", "198.51.100.8") == 59
        # A client-supplied hop before the real client is ignored; trusted hops are skipped.
        assert await remaining("10.0.0.2", "1.2.3.4, 198.51.100.7, 10.9.9.9") == 57
        # From an untrusted peer the header is ignored: the peer is the client.
        assert await remaining("192.0.2.10", "198.51.100.9") == 59
        assert await remaining("192.0.2.10", "198.51.100.10") == 58
        # The peer itself, when the header is missing.
        assert await remaining("10.0.0.4", None) == 59
    # Without trusted proxies configured, the header never matters.
    async with client_for(app, ip="10.0.0.5") as client:
        first = await client.get(ACCOUNT, headers={"X-Forwarded-For": "198.51.100.20"})
        second = await client.get(ACCOUNT, headers={"X-Forwarded-For": "198.51.100.21"})
    assert first.headers["x-ratelimit-remaining"] == "59"
    assert second.headers["x-ratelimit-remaining"] == "58"


async def test_rate_limit_scale_multiplies_plan_limits(app: FastAPI, clock: TestClock) -> None:
    clock.pinned = minute_start() + 1
    scaled = settings_like(app.state.settings, rate_limit_scale=10)
    async with running_app(scaled, clock) as bench_app:
        tenant = await make_tenant(bench_app, Plan.PRO)
        async with client_for(bench_app, tenant.live) as client:
            response = await client.get(ACCOUNT)
    assert response.headers["x-ratelimit-limit-minute"] == "600"
    assert response.headers["x-ratelimit-limit-day"] == "100000"
