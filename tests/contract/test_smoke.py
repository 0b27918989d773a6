"""Health, account and the error shape over HTTP on both databases."""

from __future__ import annotations

from fastapi import FastAPI

from tests.support import Tenant, client_for


async def test_health_ok_with_headers(app: FastAPI) -> None:
    async with client_for(app) as client:
        response = await client.get("/api/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"database": "ok", "rate_limiter": "ok"}
    assert body["api_version"] == "1.0"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["api-version"] == "1.0"
    assert response.headers["x-request-id"].startswith("req_")
    assert int(response.headers["x-ratelimit-limit"]) == 60


async def test_account_shows_plan_environment_and_usage(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.test) as client:
        first = (await client.get("/api/v1/account")).json()
        second = (await client.get("/api/v1/account")).json()
    assert first["plan"] == "pro"
    assert first["environment"] == "test"
    assert first["id"] == pro.account_id
    assert first["key"]["display"].startswith(pro.test[:12])
    assert pro.test not in str(first)
    assert first["limits"] == {"per_minute": 60, "per_day": 10000}
    assert (first["usage"]["minute"], second["usage"]["minute"]) == (1, 2)
