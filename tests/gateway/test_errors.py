"""Every error code's status and exact body, framework-generated ones included, with the
headers every response carries."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import orjson
import pytest
from fastapi import FastAPI

from solarapi.config import Settings
from tests.support import (
    GENERATED_REQUEST_ID,
    PROBE_BODY_LIMIT,
    PROBE_BOOM,
    PROBE_ECHO,
    TEST_SECRET,
    LogCapture,
    Tenant,
    assert_common_headers,
    assert_error,
    client_for,
    free_port,
    need_service,
    postgres_available,
    running_app,
    settings_like,
)


@pytest.mark.parametrize("with_key", [False, True])
async def test_routing_errors_whatever_the_key(app: FastAPI, pro: Tenant, with_key: bool) -> None:
    async with client_for(app, pro.live if with_key else None) as client:
        unknown = await client.get("/api/v1/no-such-thing")
        v2 = await client.get("/api/v2/systems")
        deep = await client.get("/api/v1/account/extra/segments")
        wrong_method = await client.delete("/api/v1/account")
        union = await client.put("/api/v1/systems")
        health_post = await client.post("/api/v1/health")
    assert (
        "No such endpoint: /api/v1/no-such-thing"
        in assert_error(unknown, 404, "not_found")["error"]
    )
    assert_error(v2, 404, "not_found")
    assert_error(deep, 404, "not_found")
    body = assert_error(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "GET, HEAD"
    assert "DELETE" in body["error"]
    assert "GET, HEAD" in body["error"]
    # GET and POST /systems are two routes; Allow lists both.
    assert_error(union, 405, "method_not_allowed")
    assert union.headers["allow"] == "GET, HEAD, POST"
    assert_error(health_post, 405, "method_not_allowed")


@pytest.mark.parametrize("path", ["/api", "/api/", "/api/v2/x", "/api/v1", "/api/v1/"])
@pytest.mark.parametrize("method", ["GET", "POST", "OPTIONS"])
async def test_paths_under_api_answer_the_json_404(app: FastAPI, path: str, method: str) -> None:
    # `/api` without a slash once fell through to the dashboard's HTML 404.
    async with client_for(app) as client:
        answer = await client.request(method, path)
        head = await client.head(path)
    body = assert_error(answer, 404, "not_found")
    assert path in body["error"]
    assert head.status_code == 404
    assert head.headers["content-type"].startswith("application/json")
    assert head.content == b""
    assert_common_headers(head)


async def test_routing_errors_are_not_counted(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        for _ in range(3):
            await client.get("/api/v1/nowhere")
        account = (await client.get("/api/v1/account")).json()
    assert account["usage"]["minute"] == 1


async def test_api_error_subclasses_render_their_status(
    probe_app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        for code, status in (
            ("validation", 400),
            ("forbidden", 403),
            ("not_found", 404),
            ("conflict", 409),
        ):
            response = await client.get(f"/api/v1/_probe/raise/{code}")
            assert assert_error(response, status, code)["error"] == f"probe {code}"


async def test_body_validation_errors(probe_app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        ok = await client.post(PROBE_ECHO, json={"name": "a", "count": 2})
        wrong_type = await client.post(PROBE_ECHO, json={"name": "a", "count": "many"})
        unknown_field = await client.post(PROBE_ECHO, json={"name": "a", "admin": True})
        missing = await client.post(PROBE_ECHO, json={})
        malformed = await client.post(
            PROBE_ECHO, content=b'{"name": "a",', headers={"Content-Type": "application/json"}
        )
        not_object = await client.post(PROBE_ECHO, json=[1, 2])
    assert ok.status_code == 200
    assert ok.json() == {"name": "a", "count": 2}
    assert assert_error(wrong_type, 400, "validation")["error"].startswith("count: ")
    assert assert_error(unknown_field, 400, "validation")["error"] == "admin: unknown field"
    assert assert_error(missing, 400, "validation")["error"] == "name: is required"
    assert "not valid JSON" in assert_error(malformed, 400, "validation")["error"]
    assert_error(not_object, 400, "validation")
    for response in (wrong_type, unknown_field, missing, malformed):
        assert "detail" not in response.text


async def test_body_over_the_limit(probe_app: FastAPI, enterprise: Tenant) -> None:
    big = orjson.dumps({"name": "x" * PROBE_BODY_LIMIT})

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    async with client_for(probe_app, enterprise.live) as client:
        declared = await client.post(
            PROBE_ECHO, content=big, headers={"Content-Type": "application/json"}
        )
        chunked = await client.post(
            PROBE_ECHO, content=chunks(), headers={"Content-Type": "application/json"}
        )
        just_fits = await client.post(
            PROBE_ECHO,
            content=orjson.dumps({"name": "x" * (PROBE_BODY_LIMIT - 20)}),
            headers={"Content-Type": "application/json"},
        )
    assert "transfer-encoding" not in declared.request.headers
    assert chunked.request.headers["transfer-encoding"] == "chunked"
    for response in (declared, chunked):
        body = assert_error(response, 413, "payload_too_large")
        assert f"limit of {PROBE_BODY_LIMIT} bytes" in body["error"]
    assert just_fits.status_code == 200


async def test_body_of_the_wrong_content_type(probe_app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        text = await client.post(
            PROBE_ECHO, content=b"name=a", headers={"Content-Type": "text/plain"}
        )
        form = await client.post(PROBE_ECHO, data={"name": "a"})
        none = await client.post(PROBE_ECHO, content=b'{"name": "a"}')
        charset = await client.post(
            PROBE_ECHO,
            content=b'{"name": "a"}',
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
    assert "text/plain" in assert_error(text, 415, "unsupported_media_type")["error"]
    assert_error(form, 415, "unsupported_media_type")
    assert "'none'" in assert_error(none, 415, "unsupported_media_type")["error"]
    assert charset.status_code == 200


async def test_unhandled_exception_is_a_500_without_internals(
    probe_app: FastAPI, enterprise: Tenant, log_lines: LogCapture
) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        response = await client.get(PROBE_BOOM, headers={"X-Request-Id": "trace-500.a"})
    body = assert_error(response, 500, "server_error")
    assert "trace-500.a" in body["error"]
    assert response.headers["x-request-id"] == "trace-500.a"
    for leak in ("SELECT", "RuntimeError", "Traceback", "api_keys", "solarapi"):
        assert leak not in response.text
    # The operator sees the exception, tied to the request id.
    records = [orjson.loads(line) for line in log_lines.lines]
    errors = [r for r in records if r["msg"] == "unhandled error"]
    assert len(errors) == 1
    assert errors[0]["request_id"] == "trace-500.a"
    assert "RuntimeError" in errors[0]["exc"]
    request_line = next(r for r in records if r["msg"] == "request")
    assert request_line["status"] == 500


@pytest.mark.parametrize(
    ("sent", "echoed"),
    [
        ("abc-123_X.y", True),
        ("x" * 128, True),
        ("x" * 129, False),
        ("has space", False),
        ("semi;colon", False),
        ("ünïcode", False),
    ],
)
async def test_request_id_echo_or_generation(app: FastAPI, sent: str, echoed: bool) -> None:
    async with client_for(app) as client:
        response = await client.get(
            "/api/v1/account", headers={"X-Request-Id": sent.encode("utf-8")}
        )
    assert response.status_code == 401
    if echoed:
        assert response.headers["x-request-id"] == sent
    else:
        assert GENERATED_REQUEST_ID.fullmatch(response.headers["x-request-id"])


async def test_generated_request_ids_are_unique(app: FastAPI) -> None:
    async with client_for(app) as client:
        ids = {(await client.get("/api/v1/health")).headers["x-request-id"] for _ in range(20)}
    assert len(ids) == 20


async def test_common_headers_on_success_and_health(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        ok = await client.get("/api/v1/account")
        health = await client.get("/api/v1/health")
        head = await client.head("/api/v1/health")
        head_account = await client.head("/api/v1/account")
    for response in (ok, health, head, head_account):
        assert response.status_code == 200
        assert_common_headers(response)
    assert head.content == b""
    assert head_account.content == b""
    assert int(head_account.headers["content-length"]) > 0
    assert ok.headers["x-ratelimit-limit"] == "60"
    assert ok.headers["x-ratelimit-limit-day"] == "10000"


async def test_large_responses_are_gzipped_with_the_headers(app: FastAPI) -> None:
    async with client_for(app) as client:
        response = await client.get("/api/v1/openapi.json", headers={"Accept-Encoding": "gzip"})
        plain = await client.get("/api/v1/openapi.json", headers={"Accept-Encoding": "identity"})
    assert response.headers["content-encoding"] == "gzip"
    assert_common_headers(response)
    assert "content-encoding" not in plain.headers
    assert response.json() == plain.json()
    assert len(gzip.compress(plain.content)) < len(plain.content)


async def test_database_down_is_a_503_with_retry_after(settings: Settings, pro: Tenant) -> None:
    need_service("PostgreSQL", postgres_available())
    dead = Settings(
        data_dir=settings.data_dir,
        database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/nothing",
        secret_key=TEST_SECRET,
        job_runner="external",
    )
    async with running_app(dead) as app, client_for(app, pro.live) as client:
        account = await client.get("/api/v1/account")
        health = await client.get("/api/v1/health")
        no_key = await client.get("/api/v1/account", headers={"Authorization": ""})
    body = assert_error(account, 503, "unavailable")
    assert account.headers["retry-after"].isdigit()
    assert "database" in body["error"].lower()
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"
    assert health.json()["checks"]["database"] == "unavailable"
    assert health.headers["retry-after"].isdigit()
    assert_common_headers(health)
    # A request that needs no database still gets its precise answer.
    assert_error(no_key, 401, "unauthorized")


async def test_every_pooled_connection_busy_is_a_503_not_a_500(
    settings: Settings, pro: Tenant, log_lines: LogCapture
) -> None:
    """A burst on a loaded machine can keep every connection busy past the pool's wait: the
    answer is a 503 with Retry-After (it was an unhandled 500), and service resumes."""
    busy = settings_like(settings, db_pool_size=1, db_pool_timeout=0.2)
    async with running_app(busy) as app, client_for(app, pro.live) as client:
        engine = app.state.engine
        held = [await engine.connect() for _ in range(1 + engine.pool._max_overflow)]
        try:
            refused = await client.get("/api/v1/account")
        finally:
            for connection in held:
                await connection.close()
        served = await client.get("/api/v1/account")
    assert_error(refused, 503, "unavailable")
    assert refused.headers["retry-after"].isdigit()
    assert served.status_code == 200
    assert "unhandled error" not in log_lines.text
