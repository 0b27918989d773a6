"""The OpenAPI document and the interactive docs: complete, public, no CDN."""

from __future__ import annotations

import re
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import FastAPI, Query

from solarapi.auth.scopes import API_PREFIX, required_plan
from solarapi.kit.openapi_fields import query_count, query_enum
from solarapi.kit.routes import iter_routes
from solarapi.openapi import NO_NUL, build_openapi
from tests.support import TestClock, client_for, need_service, run_cli, served

COMMON_HEADERS = {
    "X-Request-Id",
    "API-Version",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "RateLimit-Policy",
    "RateLimit",
}


async def test_document_describes_every_endpoint(app: FastAPI, clock: TestClock) -> None:
    # Both requests in one minute window: across a minute boundary the second would count
    # in a new window and the remaining count would not fall by one (a flake seen once).
    clock.pinned = clock()
    async with client_for(app, ip="10.210.0.1") as client:
        response = await client.get("/api/v1/openapi.json")
        again = await client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    # Public, but counted in the caller's anonymous window.
    assert response.headers["x-ratelimit-limit"] == "60"
    assert (
        int(again.headers["x-ratelimit-remaining"])
        == int(response.headers["x-ratelimit-remaining"]) - 1
    )
    doc = response.json()
    assert doc["openapi"] == "3.1.0"
    paths = doc["paths"]
    routes = [
        (path, route)
        for path, route in iter_routes(app.router.routes)
        if path.startswith(API_PREFIX) and route.include_in_schema
    ]
    assert len(routes) >= 2
    for path, route in routes:
        assert path in paths, path
        for method in route.methods or ():
            operation = paths[path][method.lower()]
            relative = path[len(API_PREFIX) :]
            responses = operation["responses"]
            assert "422" not in responses, path
            if relative == "/health/live":  # consults no window: no rate-limit headers
                assert "429" not in responses
                for body in responses.values():
                    assert set(body["headers"]) - {"Retry-After"} == {
                        "X-Request-Id",
                        "API-Version",
                    }, path
                assert "security" not in operation
                continue
            for status, body in responses.items():
                assert set(body.get("headers", {})) >= COMMON_HEADERS, (path, status)
            if relative == "/health":
                assert "security" not in operation
                continue
            assert operation["security"] == [{"bearer": []}]
            assert operation["x-required-plan"] == required_plan(method, relative).value
            for status in ("401", "403", "429", "500", "503"):
                ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/Error", (path, status)
            assert "Retry-After" in responses["429"]["headers"]
            assert "WWW-Authenticate" in responses["401"]["headers"]
            if "requestBody" in operation:
                assert {"413", "415"} <= set(responses)


async def test_error_schema_and_headers_are_components(app: FastAPI) -> None:
    async with client_for(app) as client:
        doc = (await client.get("/api/v1/openapi.json")).json()
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "code"]
    assert error["additionalProperties"] is False
    assert set(error["properties"]) == {"error", "code"}
    assert set(error["properties"]["code"]["enum"]) == {
        "unauthorized",
        "forbidden",
        "rate_limit",
        "not_found",
        "validation",
        "server_error",
        "method_not_allowed",
        "conflict",
        "payload_too_large",
        "unsupported_media_type",
        "unavailable",
        "request_timeout",
    }
    assert set(doc["components"]["headers"]) >= COMMON_HEADERS
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "secret" in doc["info"]["description"].lower()


async def test_document_says_exactly_what_the_api_accepts(app: FastAPI) -> None:
    async with client_for(app) as client:
        doc = (await client.get("/api/v1/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    # No framework leftovers (validation errors are 400 `validation`), one pagination schema.
    assert not {"HTTPValidationError", "ValidationError"} & set(schemas)
    assert [name for name in schemas if "agination" in name] == ["Pagination"]
    text = str(doc["paths"])
    for name in schemas:  # every schema is used, by an operation or another schema
        assert f"/{name}'" in text or f"/{name}'" in str(schemas), name
    operations = {
        (method, path[len(API_PREFIX) :]): operation
        for path, item in doc["paths"].items()
        for method, operation in item.items()
    }
    for key, operation in operations.items():
        assert len(operation["tags"]) == 1, key
        for status, response in operation["responses"].items():
            if status[0] in "45":
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/Error", (key, status)
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query":
                assert "anyOf" not in parameter["schema"], (key, parameter["name"])
                if parameter["name"] in ("page", "limit"):
                    assert parameter["schema"]["type"] == "integer"
                    assert parameter["schema"]["minimum"] == 1
                if parameter["name"] in ("from", "to"):
                    # JSON Schema cannot bound a date-time: each parameter says its bounds,
                    # the ones the server enforces.
                    assert "1970-01-01T00:00:00Z" in parameter["schema"]["description"], key
                    assert "2200-01-01T00:00:00Z" in parameter["schema"]["description"], key
    # The 409s the API answers outside POSTs.
    assert "409" in operations["delete", "/systems/{system_id}"]["responses"]
    assert "409" in operations["get", "/systems/{system_id}/market-value"]["responses"]

    def query(key: tuple[str, str], name: str) -> dict[str, Any]:
        params = operations[key]["parameters"]
        return next(p for p in params if p["name"] == name)  # type: ignore[no-any-return]

    zone = query(("get", "/market-prices"), "zone")
    assert zone["required"] is True
    assert "NL" in zone["schema"]["enum"]
    assert query(("get", "/market-prices"), "interval")["schema"]["enum"] == [
        "15m",
        "1h",
        "1d",
        "1w",
        "1M",
    ]
    readings = query(("get", "/systems/{system_id}/readings"), "interval")
    assert readings["schema"]["enum"] == ["15m", "30m", "1h", "1d", "1w", "1M"]
    assert query(("get", "/systems/{system_id}/readings"), "from")["schema"]["format"] == (
        "date-time"
    )
    assert query(("get", "/reports"), "status")["schema"]["enum"] == [
        "queued",
        "running",
        "completed",
        "failed",
    ]
    assert "withdrawn" in query(("get", "/declarations"), "status")["schema"]["enum"]


async def test_query_parameters_are_documented_by_their_query_schema_not_checked() -> None:
    probe = FastAPI()

    @probe.get("/probe")
    async def read(
        count: Annotated[str | None, Query(description="How many"), query_count(5, 2)] = None,
        kind: Annotated[
            str | None, Query(description="Which"), query_enum(("a", "b"), required=True)
        ] = None,
    ) -> dict[str, str | None]:
        return {"count": count, "kind": kind}

    parameters = build_openapi(probe)["paths"]["/probe"]["get"]["parameters"]
    # Exactly the declared schema: no title, the default kept, `required` as declared.
    assert parameters == [
        {
            "name": "count",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
            "description": "How many",
        },
        {
            "name": "kind",
            "in": "query",
            "required": True,
            "schema": {"type": "string", "enum": ["a", "b"]},
            "description": "Which",
        },
    ]
    # FastAPI checks neither: the route gets the text (its own parsing answers the 400s).
    transport = httpx.ASGITransport(app=probe)
    async with httpx.AsyncClient(transport=transport, base_url="http://probe") as client:
        answer = await client.get("/probe", params={"count": "many"})
    assert (answer.status_code, answer.json()) == (200, {"count": "many", "kind": None})


async def test_request_bodies_say_what_their_hand_checked_fields_accept(app: FastAPI) -> None:
    """The models' own schema (kit.openapi_fields), not a patch: closed lists, the shared
    `TimeZone`, and PATCH fields that may be left out but never be null."""
    async with client_for(app) as client:
        schemas = (await client.get("/api/v1/openapi.json")).json()["components"]["schemas"]

    def field(model: str, name: str) -> dict[str, Any]:
        return schemas[model]["properties"][name]  # type: ignore[no-any-return]

    null = {"type": "null"}
    time_zone = {"$ref": "#/components/schemas/TimeZone"}
    names = schemas["TimeZone"]["enum"]
    assert "Europe/Amsterdam" in names
    assert "localtime" not in names
    assert names == sorted(names)
    assert field("LocationIn", "timezone")["$ref"] == time_zone["$ref"]
    assert field("LocationPatch", "timezone")["$ref"] == time_zone["$ref"]
    assert field("ReportCreate", "timezone")["anyOf"] == [time_zone, null]
    assert field("LocationIn", "country")["anyOf"][0]["pattern"] == "^[A-Z]{2}$"
    for model in ("SystemCreate", "SystemPatch"):
        zone = field(model, "market_zone")["anyOf"]
        assert zone[1] == null
        assert zone[0]["enum"][0] == "NL"
    # A PATCH clears an optional field with null; the others may only be left out.
    never_null = {
        "SystemPatch": ("name", "capacity_kwp", "status", "location", "monitoring", "orientation"),
        "LocationPatch": ("latitude", "longitude", "timezone"),
        "OrientationPatch": ("tilt_deg", "azimuth_deg"),
        "MonitoringIn": ("enabled", "offline_after_hours", "underperformance_threshold"),
        "DeclarationUpdate": ("period_start", "period_end"),
    }
    for model, fields in never_null.items():
        for name in fields:
            schema = field(model, name)
            assert "anyOf" not in schema, (model, name)
            assert "default" not in schema, (model, name)
    assert field("SystemPatch", "orientation")["$ref"].endswith("/OrientationPatch")
    assert null in field("SystemPatch", "installed_on")["anyOf"]  # clearable
    assert field("DeclarationUpdate", "period_start")["format"] == "date"
    assert "data_source" not in schemas["SystemPatch"]["properties"]  # fixed at creation
    assert field("ReportCreate", "type")["enum"] == ["production", "market_value", "declarations"]
    assert field("ReportCreate", "format")["enum"] == ["csv", "pdf"]
    events = field("WebhookCreate", "events")
    assert "system.created" in events["items"]["enum"]
    assert events["minItems"] == 1
    assert events["maxItems"] == 2 * len(events["items"]["enum"])


async def test_every_free_text_string_says_it_holds_no_nul(app: FastAPI) -> None:
    """The gateway refuses U+0000 in any string; a schema that allowed it would describe
    requests that are refused (the fuzz test found `PATCH /systems/{id}` with a NUL name)."""
    async with client_for(app) as client:
        doc = (await client.get("/api/v1/openapi.json")).json()
    free: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and not {"enum", "const", "format"} & set(node):
                free.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(doc["components"]["schemas"])
    walk([op.get("parameters", []) for ops in doc["paths"].values() for op in ops.values()])
    assert len(free) > 20
    for schema in free:
        assert "pattern" in schema, schema
        assert re.search(schema["pattern"], "NL\x00") is None, schema
    assert any(schema["pattern"] == NO_NUL for schema in free)
    assert re.search(NO_NUL, "Zonnepark Noord ☀ 2") is not None
    # A name's pattern also refuses a blank one (tests/ingest/test_ingest_tokens.py).
    name = doc["components"]["schemas"]["SystemPatch"]["properties"]["name"]
    assert re.search(name["pattern"], "Zonnepark Noord ☀ 2") is not None


async def test_docs_page_uses_packaged_assets_only(app: FastAPI) -> None:
    async with client_for(app) as client:
        page = await client.get("/api/v1/docs")
        assert page.status_code == 200
        html = page.text
        urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", html)
        assert urls
        for url in urls:
            assert url.startswith("/api/v1/"), url
        assert "cdn" not in html.lower()
        assert "//" not in "".join(urls)
        bundle = await client.get("/api/v1/docs/assets/swagger-ui-bundle.js")
        css = await client.get("/api/v1/docs/assets/swagger-ui.css")
        missing = await client.get("/api/v1/docs/assets/nope.js")
    assert "/api/v1/docs/assets/swagger-ui-bundle.js" in urls
    assert "/api/v1/openapi.json" in html
    packaged = Path(str(files("fastapi_swagger") / "resources"))
    assert bundle.status_code == 200
    assert bundle.content == (packaged / "swagger-ui-bundle.js").read_bytes()
    assert "javascript" in bundle.headers["content-type"]
    assert css.status_code == 200
    assert missing.status_code == 404
    assert set(missing.json()) == {"error", "code"}


def test_cli_prints_the_same_document(tmp_path: Path) -> None:
    result = run_cli({"SOLARAPI_DATA_DIR": str(tmp_path), "SOLARAPI_REDIS_URL": ""}, "openapi")
    import orjson

    doc = orjson.loads(result.stdout)
    assert doc["openapi"] == "3.1.0"
    assert "/api/v1/account" in doc["paths"]


@pytest.mark.browser
def test_docs_render_in_a_browser_without_outside_requests(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    need_service("chromium", chromium is not None)
    from playwright.sync_api import sync_playwright

    env = {"SOLARAPI_DATA_DIR": str(tmp_path), "SOLARAPI_REDIS_URL": ""}
    run_cli(env, "migrate")
    with served(env) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            # Swagger UI lays out the whole document in the browser: seconds on a quiet
            # machine, over 20 s on a loaded one (it timed out there). A bound on the wait,
            # not on the speed.
            page.set_default_timeout(180_000)
            outside: list[str] = []
            page.on(
                "request",
                lambda request: (
                    outside.append(request.url) if not request.url.startswith(server.base) else None
                ),
            )
            page.goto(f"{server.base}/api/v1/docs")
            page.get_by_text("/api/v1/account", exact=True).first.wait_for()
            text = page.inner_text("body")
        finally:
            browser.close()
    assert outside == []
    assert "Unable to render" not in text
    assert "Solar Energy Platform API" in text
