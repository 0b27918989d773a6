"""Who may see and touch declarations: plans (403) and tenancy/environment (404)."""

from __future__ import annotations

from datetime import date

import httpx
from fastapi import FastAPI

from solarapi.kit.plans import Plan
from tests.declarations.factories import MAY_1, create_declaration, make_system, upload_days
from tests.support import Tenant, client_for, make_tenant


def _every_endpoint(declaration_id: str) -> list[tuple[str, str, dict[str, object] | None]]:
    path = f"/api/v1/declarations/{declaration_id}"
    return [
        ("GET", "/api/v1/declarations", None),
        ("POST", "/api/v1/declarations", {"system_id": "sys_x", "type": "feed_in"}),
        ("GET", path, None),
        ("PATCH", path, {"reference": "x"}),
        ("DELETE", path, None),
        ("POST", f"{path}/submit", None),
        ("POST", f"{path}/withdraw", None),
        ("GET", f"{path}/history", None),
    ]


async def _call(
    client: httpx.AsyncClient, method: str, url: str, body: dict[str, object] | None
) -> httpx.Response:
    return (
        await client.request(method, url, json=body) if body else await client.request(method, url)
    )


async def test_pro_and_starter_are_forbidden(
    app: FastAPI, enterprise: Tenant, pro: Tenant, starter: Tenant
) -> None:
    async with client_for(app, enterprise.live) as owner:
        system = await make_system(owner)
        await upload_days(owner, system, MAY_1, date(2025, 5, 2))
        declaration_id = (await create_declaration(owner, system["id"])).json()["id"]
    for tenant, plan in ((pro, "Pro"), (starter, "Starter")):
        async with client_for(app, tenant.live) as client:
            for method, url, body in _every_endpoint(declaration_id):
                response = await _call(client, method, url, body)
                assert response.status_code == 403, (plan, method, url, response.text)
                assert response.json()["code"] == "forbidden"
                if plan == "Pro":
                    assert "Declarations require the Enterprise plan" in response.json()["error"]


async def test_other_tenants_and_the_other_environment_see_nothing(
    app: FastAPI, enterprise: Tenant
) -> None:
    stranger = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, enterprise.live) as owner:
        system = await make_system(owner)
        await upload_days(owner, system, MAY_1, date(2025, 5, 2))
        declaration_id = (await create_declaration(owner, system["id"])).json()["id"]

    for key in (stranger.live, stranger.test, enterprise.test):
        async with client_for(app, key) as client:
            for method, url, body in _every_endpoint(declaration_id)[2:]:
                response = await _call(client, method, url, body)
                assert response.status_code == 404, (method, url, response.text)
                assert response.json()["code"] == "not_found"
            listed = (await client.get("/api/v1/declarations")).json()
            assert declaration_id not in {d["id"] for d in listed["data"]}
            # Someone else's system (or this account's system seen from the sandbox).
            foreign = await create_declaration(client, system["id"])
            # The same answer as an id that does not exist: nothing tells them apart.
            assert foreign.status_code == 404, foreign.text
            assert foreign.json() == {
                "error": f"No system with id '{system['id']}'",
                "code": "not_found",
            }
            filtered = await client.get("/api/v1/declarations", params={"system_id": system["id"]})
            assert filtered.json() == foreign.json()

    # The owner still has it, untouched.
    async with client_for(app, enterprise.live) as owner:
        still = await owner.get(f"/api/v1/declarations/{declaration_id}")
        assert still.status_code == 200
        assert still.json()["status"] == "draft"
        assert still.json()["reference"] is None


async def test_unknown_ids_are_404(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        for method, url, body in _every_endpoint("dcl_01JD000000000000000000000")[2:]:
            response = await _call(client, method, url, body)
            assert response.status_code == 404, (method, url)
        missing = await create_declaration(client, "sys_01JD000000000000000000000")
        assert missing.status_code == 404
        assert missing.json()["error"] == "No system with id 'sys_01JD000000000000000000000'"
