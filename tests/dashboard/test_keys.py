"""Settings → API, the plan page and usage over HTTP, on both databases."""

from __future__ import annotations

import re
import time

from fastapi import FastAPI
from sqlalchemy import select

from solarapi.auth.keys import KEY_PATTERN, display_form, hash_key
from solarapi.kit.plans import PLAN_LIMITS, Plan
from solarapi.models import ApiKey
from tests.dashboard.helpers import (
    browser_for,
    create_key,
    csrf_of,
    log_in,
    nonce_of,
    text_of,
)
from tests.support import Tenant, TestClock, client_for

_NEW_KEY = re.compile(r'<code id="new-key" class="new-key">([^<]+)</code>')


async def test_a_key_is_shown_once_works_and_revocation_applies_at_once(
    app: FastAPI, pro: Tenant
) -> None:
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        created = await create_key(client, "Billing server", "live")
        assert created.status_code == 200
        assert created.headers["cache-control"] == "no-store"
        match = _NEW_KEY.search(created.text)
        assert match
        key = match.group(1)
        assert KEY_PATTERN.match(key)
        assert key.startswith("pk_live_")
        page = text_of(created)
        assert "It will not be shown again" in page
        assert "secret" in page
        assert 'data-copy="#new-key"' in created.text

        listing = await client.get("/settings/api")
        assert key not in listing.text
        assert display_form(key) in text_of(listing)

        async with app.state.sessionmaker() as session:
            stored = await session.scalar(
                select(ApiKey).where(
                    ApiKey.account_id == pro.account_id, ApiKey.name == "Billing server"
                )
            )
        assert stored is not None
        assert stored.key_hash == hash_key(key, app.state.settings.effective_secret_key)
        assert stored.environment == "live"

        async with client_for(app, key) as api:
            account = await api.get("/api/v1/account")
            assert account.status_code == 200
            assert account.json()["key"]["id"] == stored.id

            confirm = await client.get(f"/settings/api/keys/{stored.id}/revoke")
            assert confirm.status_code == 200
            assert "Revoke this key?" in confirm.text
            revoked = await client.post(
                f"/settings/api/keys/{stored.id}/revoke", data={"csrf": csrf_of(confirm)}
            )
            assert revoked.status_code == 303
            assert revoked.headers["location"] == "/settings/api?notice=revoked"
            after = await client.get(revoked.headers["location"])
            assert "The key was revoked" in after.text
            assert "Revoked" in after.text

            refused = await api.get("/api/v1/account")
            assert refused.status_code == 401


async def test_a_test_key_and_the_list_columns(app: FastAPI, enterprise: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, enterprise.email, enterprise.password)
        created = await create_key(client, "Sandbox <script>", "test")
        match = _NEW_KEY.search(created.text)
        assert match
        assert match.group(1).startswith("pk_test_")
        listing = await client.get("/settings/api")
    # Names are escaped, never markup.
    assert "Sandbox <script>" not in listing.text
    assert "Sandbox &lt;script&gt;" in listing.text
    async with app.state.sessionmaker() as session:
        keys = (
            await session.scalars(select(ApiKey).where(ApiKey.account_id == enterprise.account_id))
        ).all()
    for key in keys:
        row = re.search(rf'<tr id="key-{key.id}".*?</tr>', listing.text, re.S)
        assert row, key.id
        badge = "Test" if key.environment == "test" else "Live"
        assert f'badge env-{key.environment}">{badge}<' in row.group(0)
        assert key.display in text_of(listing)
        assert "Active" in row.group(0)


async def test_a_resent_create_form_makes_no_second_key(app: FastAPI, pro: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        page = await client.get("/settings/api")
        form = {
            "csrf": csrf_of(page),
            "nonce": nonce_of(page),
            "name": "Only once",
            "environment": "live",
        }
        first = await client.post("/settings/api/keys", data=form)
        assert first.status_code == 200
        again = await client.post("/settings/api/keys", data=form)
        assert again.status_code == 303
        assert again.headers["location"] == "/settings/api?notice=already-created"
    async with app.state.sessionmaker() as session:
        named = (
            await session.scalars(
                select(ApiKey).where(
                    ApiKey.account_id == pro.account_id, ApiKey.name == "Only once"
                )
            )
        ).all()
    assert len(named) == 1


async def test_key_form_errors_are_shown_beside_the_form(app: FastAPI, pro: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        no_name = await create_key(client, "   ", "live")
        assert no_name.status_code == 400
        assert "Key name must be 1–100 characters." in text_of(no_name)
        bad_env = await create_key(client, "x", "staging")
        assert bad_env.status_code == 400
        assert "Choose live or test" in bad_env.text


async def test_starter_sees_why_and_cannot_create_keys(app: FastAPI, starter: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, starter.email, starter.password)
        page = await client.get("/settings/api")
        assert 'id="create-key"' not in page.text
        assert "Starter plan" in page.text
        assert "Pro plan" in page.text
        forced = await client.post(
            "/settings/api/keys",
            data={"csrf": csrf_of(page), "name": "sneaky", "environment": "live"},
        )
        assert forced.status_code == 403
    async with app.state.sessionmaker() as session:
        sneaky = await session.scalar(
            select(ApiKey).where(ApiKey.account_id == starter.account_id, ApiKey.name == "sneaky")
        )
    assert sneaky is None


async def test_another_accounts_key_cannot_be_revoked(
    app: FastAPI, pro: Tenant, enterprise: Tenant
) -> None:
    victim = enterprise.key_ids[next(iter(enterprise.key_ids))]
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        page = await client.get("/settings/api")
        assert (await client.get(f"/settings/api/keys/{victim}/revoke")).status_code == 404
        attempt = await client.post(
            f"/settings/api/keys/{victim}/revoke", data={"csrf": csrf_of(page)}
        )
        assert attempt.status_code == 404
        assert attempt.headers["content-type"].startswith("text/html")
    async with client_for(app, enterprise.live) as api:
        assert (await api.get("/api/v1/account")).status_code == 200


async def test_usage_shows_todays_requests_per_key(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    clock.pinned = time.time()
    from solarapi.kit.plans import Environment

    async with client_for(app, pro.live) as api:
        for _ in range(3):
            assert (await api.get("/api/v1/account")).status_code == 200
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        page = await client.get("/usage")
    assert page.status_code == 200
    live_id = pro.key_ids[Environment.LIVE]
    test_id = pro.key_ids[Environment.TEST]
    limits = PLAN_LIMITS[Plan.PRO]
    live_row = re.search(rf'<tr id="usage-{live_id}">.*?</tr>', page.text, re.S)
    test_row = re.search(rf'<tr id="usage-{test_id}">.*?</tr>', page.text, re.S)
    assert live_row
    assert test_row
    assert '<span class="today">3</span>' in live_row.group(0)
    assert f"/ {limits.per_day:,}" in live_row.group(0)
    assert '<span class="minute">3</span>' in live_row.group(0)
    assert f"/ {limits.per_minute:,}" in live_row.group(0)
    assert '<span class="today">0</span>' in test_row.group(0)
    assert f'max="{limits.per_day}" value="3"' in live_row.group(0)


async def test_usage_and_plan_pages_for_starter(app: FastAPI, starter: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, starter.email, starter.password)
        usage = await client.get("/usage")
        plan = await client.get("/settings/plan")
    assert "no API access" in usage.text
    assert re.search(r'id="current-plan">Starter<', plan.text)
    for tier in Plan:
        limits = PLAN_LIMITS[tier]
        section = re.search(rf'id="plan-{tier.value}">.*?</section>', plan.text, re.S)
        assert section, tier
        if limits.api:
            assert f"{limits.per_minute:,}" in section.group(0)
            assert f"{limits.per_day:,}" in section.group(0)
        else:
            assert "none" in section.group(0)
