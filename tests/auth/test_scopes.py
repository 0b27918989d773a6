"""The plan × method × endpoint 403 matrix, driven from `auth/scopes.py` over the app's
actual route table, and checked against the contract's plan table written out here."""

from __future__ import annotations

import re
import time

import httpx
from fastapi import APIRouter, FastAPI

from solarapi.auth.scopes import API_PREFIX, PRO_READABLE, PUBLIC, required_plan
from solarapi.gateway import RouteTable
from solarapi.kit.plans import Plan
from solarapi.kit.routes import iter_routes
from tests.support import Tenant, TestClock, client_for

# Contract section 2, "Pro may call": GET on /account, /systems…, /systems/{id}/readings,
# /systems/{id}/summary, /systems/{id}/market-value, /market-prices…
_CONTRACT_PRO_EXACT = {
    "/account",
    "/systems",
    "/systems/{system_id}",
    "/systems/{system_id}/readings",
    "/systems/{system_id}/summary",
    "/systems/{system_id}/market-value",
    # Section 12 (Pro): the performance read and its stored irradiance; uploads Enterprise.
    "/systems/{system_id}/performance",
    "/systems/{system_id}/irradiance",
    # Section 11 (2026-11-25)
    "/readings/changes",
    "/portfolio/readings",
    "/portfolio/summary",
    "/portfolio/market-value",
    # Section 13 (2026-11-25): alerts are read on Pro.
    "/alerts",
    "/alerts/{alert_id}",
}


def contract_allows_pro(method: str, relative: str) -> bool:
    if method not in ("GET", "HEAD"):
        return False
    return relative in _CONTRACT_PRO_EXACT or relative.startswith("/market-prices")


def api_operations(app: FastAPI) -> list[tuple[str, str]]:
    """(method, relative template) of every authenticated operation the app serves."""
    table = app.state.route_table.templates
    operations = []
    for template, methods in sorted(table.items()):
        if not template.startswith(API_PREFIX + "/"):
            continue
        relative = template[len(API_PREFIX) :]
        if relative in PUBLIC or relative.startswith("/docs"):
            continue
        operations += [(method, relative) for method in sorted(methods)]
    return operations


def concrete(relative: str) -> str:
    return API_PREFIX + re.sub(r"\{[^}]+\}", "zz_00000000000000000000000000", relative)


async def test_every_api_route_is_in_the_gateway_route_table(app: FastAPI) -> None:
    table = app.state.route_table.templates
    served = [(p, r) for p, r in iter_routes(app.router.routes) if p.startswith(API_PREFIX)]
    assert len(served) > 5
    for path, route in served:
        assert path in table, f"{path} is not known to the gateway"
        assert set(route.methods or ()) <= table[path], path
    # FastAPI's own view of the app (the OpenAPI document) agrees.
    async with client_for(app) as client:
        document = (await client.get("/api/v1/openapi.json")).json()
    for path, operations in document["paths"].items():
        assert path in table, f"{path} is in the OpenAPI document but unknown to the gateway"
        assert {m.upper() for m in operations} <= table[path], path


def test_scope_table_matches_the_contract_for_every_route(app: FastAPI) -> None:
    operations = api_operations(app)
    assert ("GET", "/account") in operations
    for method, relative in operations:
        expected = Plan.PRO if contract_allows_pro(method, relative) else Plan.ENTERPRISE
        assert required_plan(method, relative) is expected, (method, relative)
    # Unknown templates default to Enterprise: a new route is closed until classified.
    assert required_plan("GET", "/something-new") is Plan.ENTERPRISE
    assert all(contract_allows_pro("GET", t) for t in PRO_READABLE)


async def _call(client: httpx.AsyncClient, method: str, url: str) -> httpx.Response:
    if method in ("POST", "PUT", "PATCH"):
        return await client.request(method, url, json={})
    return await client.request(method, url)


async def test_plan_method_endpoint_matrix(
    app: FastAPI, starter: Tenant, pro: Tenant, enterprise: Tenant, clock: TestClock
) -> None:
    operations = api_operations(app)
    now = float(int(time.time()) // 60 * 60)
    tenants = {Plan.STARTER: starter, Plan.PRO: pro, Plan.ENTERPRISE: enterprise}
    checked = 0
    for plan, tenant in tenants.items():
        async with client_for(app, tenant.live) as client:
            for method, relative in operations:
                # A fresh minute for every call: this test is about scope, not limits.
                now += 60
                clock.pinned = now
                response = await _call(client, method, concrete(relative))
                where = f"{plan.value} {method} {relative}: {response.status_code} {response.text}"
                assert response.status_code < 500, where
                if relative == "/ingest/readings":
                    # Ingest tokens only (contract section 14): every API key is a 401.
                    assert response.status_code == 401, where
                    checked += 1
                    continue
                assert response.status_code != 401, where
                if plan is Plan.STARTER:
                    assert response.status_code == 403, where
                    if method != "HEAD":
                        assert "Starter plan has no API access" in response.json()["error"]
                elif plan is Plan.PRO and not contract_allows_pro(method, relative):
                    assert response.status_code == 403, where
                    if method != "HEAD":
                        body = response.json()
                        assert set(body) == {"error", "code"}
                        assert body["code"] == "forbidden"
                        assert "Enterprise plan" in body["error"], where
                        assert "Pro plan" in body["error"], where
                else:
                    assert response.status_code != 403, where
                checked += 1
    assert checked == 3 * len(operations)


async def test_forbidden_messages_name_the_area(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        declarations = await client.get("/api/v1/declarations")
        create_system = await client.post("/api/v1/systems", json={})
    assert declarations.status_code == 403
    assert declarations.json()["error"].startswith("Declarations require the Enterprise plan")
    assert create_system.status_code == 403
    assert "systems" in create_system.json()["error"]
    assert "Enterprise plan" in create_system.json()["error"]


async def test_system_writes_name_the_operation_and_the_every_plan_ways(
    app: FastAPI, pro: Tenant
) -> None:
    """A Pro key's 403 under /systems names the operation asked for (an irradiance upload is
    not "uploading readings") and where every plan can do it instead."""
    async with client_for(app, pro.live) as client:
        system_id = "sys_any"  # the plan is checked before the system is looked for
        asks = {
            ("POST", "/systems"): "Creating systems",
            ("PATCH", f"/systems/{system_id}"): "Changing systems",
            ("DELETE", f"/systems/{system_id}"): "Deleting systems",
            ("POST", f"/systems/{system_id}/readings"): "Uploading readings",
            ("POST", f"/systems/{system_id}/irradiance"): "Uploading irradiance",
            ("GET", f"/systems/{system_id}/ingest-tokens"): "Listing ingest tokens",
            ("POST", f"/systems/{system_id}/ingest-tokens"): "Creating ingest tokens",
            ("DELETE", f"/systems/{system_id}/ingest-tokens/itk_x"): "Revoking ingest tokens",
        }
        for (method, path), operation in asks.items():
            response = await client.request(method, f"/api/v1{path}", json={})
            assert response.status_code == 403, (method, path, response.text)
            error = response.json()["error"]
            assert error.startswith(f"{operation} through the API requires the Enterprise plan")
            assert "Pro plan" in error
            assert "ingest token" in error
            assert "dashboard" in error


async def test_scope_is_checked_before_the_body(app: FastAPI, pro: Tenant) -> None:
    # Order of checks: 403 comes before 415/400, so a Pro key learns about its plan first.
    async with client_for(app, pro.live) as client:
        response = await client.post(
            "/api/v1/systems", content=b"not json", headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 403


def test_route_table_sees_routers_included_into_routers() -> None:
    async def endpoint() -> None:
        return None

    inner = APIRouter()
    inner.add_api_route("/items/{item_id}", endpoint, methods=["GET"])
    inner.add_api_route("/items/{item_id}", endpoint, methods=["DELETE"])
    outer = APIRouter()
    outer.include_router(inner, prefix="/nested")
    outer.add_api_route("/top", endpoint, methods=["POST"])
    served = FastAPI()
    served.include_router(outer, prefix=API_PREFIX)
    table = RouteTable.from_routes(served.router.routes)

    found = table.match("/api/v1/nested/items/abc", "GET")
    assert (found.template, found.allowed) == ("/api/v1/nested/items/{item_id}", True)
    wrong = table.match("/api/v1/nested/items/abc", "PUT")
    assert (wrong.allowed, wrong.allow_header) == (False, "DELETE, GET, HEAD")
    assert table.match("/api/v1/top", "POST").allowed
    assert table.match("/api/v1/nested/items", "GET").template is None
