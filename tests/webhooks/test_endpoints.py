"""Webhook endpoints through the HTTP API: CRUD, the secret shown once, URL rules, scope."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI

from solarapi.webhooks.signing import derive_secret
from tests.support import Tenant, client_for

PUBLIC_URL = "https://1.1.1.1/hooks/solar"
UNRESOLVABLE_URL = "https://receiver.example.invalid/hooks"


async def create(app: FastAPI, key: str, **body: object) -> dict[str, object]:
    payload = {"url": PUBLIC_URL, "events": ["system.created"], **body}
    async with client_for(app, key) as client:
        response = await client.post("/api/v1/webhooks", json=payload)
    assert response.status_code == 201, response.text
    result: dict[str, object] = response.json()
    return result


async def test_create_returns_secret_once_and_location(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/webhooks",
            json={
                "url": PUBLIC_URL,
                "events": ["report.completed", "system.created", "report.completed"],
                "description": "ERP",
            },
        )
        assert response.status_code == 201, response.text
        created = response.json()
        assert re.fullmatch(r"whk_[0-9A-Z]{26}", created["id"])
        assert response.headers["location"] == f"/api/v1/webhooks/{created['id']}"
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", created["secret"])
        # Duplicates are dropped, order kept.
        assert created["events"] == ["report.completed", "system.created"]
        assert created["status"] == "enabled"
        assert created["environment"] == "live"
        assert created["description"] == "ERP"
        assert created["created_at"].endswith("Z")

        one = await client.get(f"/api/v1/webhooks/{created['id']}")
        assert one.status_code == 200
        assert "secret" not in one.json()
        assert created["secret"] not in one.text
        listing = await client.get("/api/v1/webhooks")
        assert created["secret"] not in listing.text
        assert [item["id"] for item in listing.json()["data"]] == [created["id"]]
        assert listing.json()["pagination"]["total"] == 1


async def test_secret_is_derived_not_stored(app: FastAPI, enterprise: Tenant) -> None:
    from sqlalchemy import select

    from solarapi.models.webhooks import WebhookEndpoint

    created = await create(app, enterprise.live)
    async with app.state.sessionmaker() as session:
        row = await session.scalar(
            select(WebhookEndpoint).where(WebhookEndpoint.id == created["id"])
        )
    assert row is not None
    secret = str(created["secret"])
    stored = " ".join(str(value) for value in vars(row).values())
    assert secret not in stored
    assert secret.removeprefix("whsec_") not in stored
    assert derive_secret(app.state.settings.effective_secret_key, row.secret_salt) == secret


async def test_list_is_ordered_and_paginated(app: FastAPI, enterprise: Tenant) -> None:
    ids = [str((await create(app, enterprise.live, description=f"n{i}"))["id"]) for i in range(3)]
    async with client_for(app, enterprise.live) as client:
        first = await client.get("/api/v1/webhooks", params={"limit": 2})
        second = await client.get("/api/v1/webhooks", params={"limit": 2, "page": 2})
    assert [item["id"] for item in first.json()["data"]] == ids[:2]
    assert [item["id"] for item in second.json()["data"]] == ids[2:]
    assert first.json()["pagination"] == {
        "page": 1,
        "limit": 2,
        "total": 3,
        "total_pages": 2,
        "has_more": True,
    }


async def test_patch_changes_only_given_fields(app: FastAPI, enterprise: Tenant) -> None:
    created = await create(app, enterprise.live, description="keep me")
    async with client_for(app, enterprise.live) as client:
        response = await client.patch(
            f"/api/v1/webhooks/{created['id']}",
            json={"events": ["declaration.approved", "declaration.rejected"], "status": "disabled"},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["events"] == ["declaration.approved", "declaration.rejected"]
        assert body["status"] == "disabled"
        assert body["description"] == "keep me"
        assert body["url"] == PUBLIC_URL

        cleared = await client.patch(
            f"/api/v1/webhooks/{created['id']}", json={"description": None, "status": "enabled"}
        )
        assert cleared.json()["description"] is None
        assert cleared.json()["status"] == "enabled"
        assert cleared.json()["disabled_reason"] is None

        bad = await client.patch(f"/api/v1/webhooks/{created['id']}", json={"url": None})
        assert bad.status_code == 400
        assert bad.json() == {"error": "url: must not be null", "code": "validation"}
        unknown = await client.patch(f"/api/v1/webhooks/{created['id']}", json={"secret": "x"})
        assert unknown.status_code == 400
        assert unknown.json()["error"] == "secret: unknown field"


async def test_delete(app: FastAPI, enterprise: Tenant) -> None:
    created = await create(app, enterprise.live)
    async with client_for(app, enterprise.live) as client:
        deleted = await client.delete(f"/api/v1/webhooks/{created['id']}")
        assert deleted.status_code == 204
        assert deleted.content == b""
        again = await client.get(f"/api/v1/webhooks/{created['id']}")
        assert again.status_code == 404
        assert again.json()["code"] == "not_found"


async def test_rotate_secret_returns_a_new_secret(app: FastAPI, enterprise: Tenant) -> None:
    created = await create(app, enterprise.live)
    async with client_for(app, enterprise.live) as client:
        response = await client.post(f"/api/v1/webhooks/{created['id']}/rotate-secret")
    assert response.status_code == 200, response.text
    rotated = response.json()
    assert rotated["secret"].startswith("whsec_")
    assert rotated["secret"] != created["secret"]
    assert rotated["previous_secret_expires_at"] is not None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"url": PUBLIC_URL, "events": ["system.exploded"]},
            "events[0]: unknown event type 'system.exploded'",
        ),
        ({"url": PUBLIC_URL, "events": []}, "events: List should have at least 1 item"),
        ({"url": PUBLIC_URL}, "events: is required"),
        ({"events": ["system.created"]}, "url: is required"),
        ({"url": "http://1.1.1.1/hooks", "events": ["system.created"]}, "url: url must use https"),
        (
            {"url": "ftp://1.1.1.1/x", "events": ["system.created"]},
            "url: url must start with https://",
        ),
        (
            {"url": "https://user:pw@1.1.1.1/x", "events": ["system.created"]},
            "must not contain a user name",
        ),
        ({"url": "https:///nohost", "events": ["system.created"]}, "url: url has no host"),
        ({"url": PUBLIC_URL, "events": ["system.created"], "extra": 1}, "extra: unknown field"),
    ],
)
async def test_invalid_bodies(
    app: FastAPI, enterprise: Tenant, body: dict[str, object], message: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post("/api/v1/webhooks", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://10.0.0.1/hooks", "10.0.0.1, a private address"),
        ("https://192.168.1.20/hooks", "a private address"),
        ("https://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("https://[::1]/hooks", "::1, a loopback address"),
        ("https://127.0.0.1:8443/hooks", "a loopback address"),
        ("https://localhost/hooks", "localhost resolves to 127.0.0.1, a loopback address"),
        ("https://[::ffff:10.0.0.1]/hooks", "a private address"),
        ("https://[fe80::1]/hooks", "a link-local address"),
        ("https://100.64.0.1/hooks", "non-public"),
        ("https://0.0.0.0/hooks", "an unspecified address"),
        ("https://metadata.google.internal/computeMetadata/v1/", "cloud metadata host name"),
    ],
)
async def test_forbidden_destinations_are_refused(
    app: FastAPI, enterprise: Tenant, url: str, reason: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/webhooks", json={"url": url, "events": ["system.created"]}
        )
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "validation"
        assert reason in response.json()["error"]
        listing = await client.get("/api/v1/webhooks")
    assert listing.json()["pagination"]["total"] == 0


async def test_patch_to_forbidden_url_is_refused(app: FastAPI, enterprise: Tenant) -> None:
    created = await create(app, enterprise.live)
    async with client_for(app, enterprise.live) as client:
        response = await client.patch(
            f"/api/v1/webhooks/{created['id']}", json={"url": "https://169.254.169.254/"}
        )
        assert response.status_code == 400
        assert "metadata" in response.json()["error"]
        unchanged = await client.get(f"/api/v1/webhooks/{created['id']}")
    assert unchanged.json()["url"] == PUBLIC_URL


async def test_unresolvable_host_is_accepted(app: FastAPI, enterprise: Tenant) -> None:
    created = await create(app, enterprise.live, url=UNRESOLVABLE_URL)
    assert created["url"] == UNRESOLVABLE_URL


async def test_loopback_http_only_when_operator_allows(
    app: FastAPI, loopback_app: FastAPI, enterprise: Tenant, loopback_tenant: Tenant
) -> None:
    body = {"url": "http://127.0.0.1:9/hooks", "events": ["system.created"]}
    async with client_for(app, enterprise.live) as client:
        refused = await client.post("/api/v1/webhooks", json=body)
    assert refused.status_code == 400
    async with client_for(loopback_app, loopback_tenant.live) as client:
        allowed = await client.post("/api/v1/webhooks", json=body)
        assert allowed.status_code == 201, allowed.text
        localhost = await client.post(
            "/api/v1/webhooks", json={**body, "url": "http://localhost:9/hooks"}
        )
        assert localhost.status_code == 201, localhost.text
        # Loopback permission never opens private networks, nor plain http to the internet.
        private = await client.post("/api/v1/webhooks", json={**body, "url": "https://10.1.2.3/"})
        assert private.status_code == 400
        plain = await client.post("/api/v1/webhooks", json={**body, "url": "http://1.1.1.1/"})
        assert plain.status_code == 400
        assert "plain http is accepted only for loopback" in plain.json()["error"]


async def test_tenant_and_environment_isolation(
    app: FastAPI, enterprise: Tenant, loopback_tenant: Tenant
) -> None:
    created = await create(app, enterprise.live)
    path = f"/api/v1/webhooks/{created['id']}"
    async with client_for(app, enterprise.test) as sandbox:
        assert (await sandbox.get(path)).status_code == 404
        assert (await sandbox.get("/api/v1/webhooks")).json()["pagination"]["total"] == 0
    async with client_for(app, loopback_tenant.live) as other:
        for response in (
            await other.get(path),
            await other.patch(path, json={"description": "mine"}),
            await other.delete(path),
            await other.post(f"{path}/rotate-secret"),
            await other.get(f"{path}/deliveries"),
        ):
            assert response.status_code == 404
            assert response.json()["code"] == "not_found"


async def test_pro_and_starter_are_forbidden(app: FastAPI, pro: Tenant, starter: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        for response in (
            await client.get("/api/v1/webhooks"),
            await client.post(
                "/api/v1/webhooks", json={"url": PUBLIC_URL, "events": ["system.created"]}
            ),
            await client.get("/api/v1/events"),
        ):
            assert response.status_code == 403
            assert response.json()["code"] == "forbidden"
            assert "Enterprise" in response.json()["error"]
    async with client_for(app, starter.live) as client:
        assert (await client.get("/api/v1/webhooks")).status_code == 403


async def test_endpoint_limit(app: FastAPI, enterprise: Tenant) -> None:
    from solarapi.webhooks.service import MAX_ENDPOINTS_PER_ENVIRONMENT

    for _ in range(MAX_ENDPOINTS_PER_ENVIRONMENT):
        await create(app, enterprise.test)
    async with client_for(app, enterprise.test) as client:
        response = await client.post(
            "/api/v1/webhooks", json={"url": PUBLIC_URL, "events": ["system.created"]}
        )
    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert f"{MAX_ENDPOINTS_PER_ENVIRONMENT} webhook endpoints" in response.json()["error"]
