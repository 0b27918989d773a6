"""The audit trail: what is recorded (who, what, when, from where) for the dashboard's and
the operator's actions, `solarapi audit list`, and the one JSON log line per entry."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from fastapi import FastAPI

from solarapi.kit.plans import Environment
from solarapi.logs import JsonFormatter
from tests.dashboard.helpers import browser_for, create_key, csrf_of, log_in, new_email, sign_up
from tests.support import Tenant, client_for, run_cli, settings_env


def _trail(app: FastAPI, account: str, *extra: str) -> list[dict[str, Any]]:
    result = run_cli(
        settings_env(app.state.settings), "audit", "list", "--account", account, "--json", *extra
    )
    return orjson.loads(result.stdout)  # type: ignore[no-any-return]


async def test_dashboard_actions_are_recorded_with_who_and_from_where(
    app: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    email = new_email()
    caplog.set_level(logging.INFO, logger="solarapi.audit")
    async with browser_for(app, ip="192.0.2.10") as browser:
        assert (await sign_up(browser, email)).status_code == 303
        await browser.post("/logout", data={"csrf": csrf_of(await browser.get("/overview"))})
        assert (await log_in(browser, email, "wrong password here")).status_code == 400
        assert (await log_in(browser, email, "correct horse battery")).status_code == 303
    async with browser_for(app, ip="192.0.2.99") as stranger:
        assert (await log_in(stranger, "nobody-" + email, "whatever it is")).status_code == 400

    trail = _trail(app, email)
    assert [entry["action"] for entry in trail] == [
        "login.succeeded",
        "login.failed",
        "account.created",
    ]  # newest first
    account_id = trail[0]["account_id"]
    assert account_id.startswith("acct_")
    assert {entry["ip"] for entry in trail} == {"192.0.2.10"}
    assert {entry["subject"] for entry in trail} == {email}
    assert trail[0]["actor"].startswith("user:usr_")
    assert trail[1]["details"] == {"reason": "wrong password"}
    assert trail[2]["details"] == {"plan": "starter", "via": "dashboard sign-up"}

    # A failed log-in for an address nobody has: no account, the address as typed.
    everything = orjson.loads(
        run_cli(settings_env(app.state.settings), "audit", "list", "--json").stdout
    )
    unknown = [e for e in everything if e["subject"] == "nobody-" + email]
    assert len(unknown) == 1
    assert unknown[0] | {"id": None, "occurred_at": None} == {
        "id": None,
        "occurred_at": None,
        "action": "login.failed",
        "actor": "anonymous:-",
        "account_id": None,
        "subject": "nobody-" + email,
        "ip": "192.0.2.99",
        "details": {"reason": "wrong password"},
    }

    # One JSON log line per entry, with the same fields.
    lines = [orjson.loads(JsonFormatter().format(r)) for r in caplog.records]
    logged = [line for line in lines if line.get("subject") == email]
    assert [line["action"] for line in logged] == [
        "account.created",
        "login.failed",
        "login.succeeded",
    ]
    assert all(line["msg"] == "audit" and line["client_ip"] == "192.0.2.10" for line in logged)
    assert "wrong password here" not in caplog.text


async def test_keys_created_and_revoked_in_the_dashboard(app: FastAPI, pro: Tenant) -> None:
    async with browser_for(app, ip="198.51.100.7") as browser:
        assert (await log_in(browser, pro.email, pro.password)).status_code == 303
        assert (await create_key(browser, "Grafana")).status_code == 200
        listed = orjson.loads(
            run_cli(
                settings_env(app.state.settings), "keys", "list", "--account", pro.email, "--json"
            ).stdout
        )
        grafana = next(k for k in listed if k["name"] == "Grafana")
        confirm = await browser.get(f"/settings/api/keys/{grafana['id']}/revoke")
        for _ in range(2):  # the second revocation changes nothing and records nothing
            await browser.post(
                f"/settings/api/keys/{grafana['id']}/revoke", data={"csrf": csrf_of(confirm)}
            )
    trail = _trail(app, pro.account_id)
    keys = [e for e in trail if e["action"].startswith("key.")]
    assert [(e["action"], e["subject"], e["ip"]) for e in keys] == [
        ("key.revoked", grafana["id"], "198.51.100.7"),
        ("key.created", grafana["id"], "198.51.100.7"),
    ]
    assert keys[0]["details"] == {"environment": "live", "display": grafana["display"]}


async def test_ingest_tokens_created_and_revoked_through_the_api(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live, ip="203.0.113.5") as api:
        system = (
            await api.post(
                "/api/v1/systems",
                json={
                    "name": "Logger roof",
                    "capacity_kwp": 5,
                    "location": {"latitude": 52, "longitude": 5, "timezone": "Europe/Amsterdam"},
                },
            )
        ).json()["id"]
        created = await api.post(
            f"/api/v1/systems/{system}/ingest-tokens", json={"name": "roof logger"}
        )
        assert created.status_code == 201, created.text
        token = created.json()
        revoked = await api.delete(f"/api/v1/systems/{system}/ingest-tokens/{token['id']}")
        assert revoked.status_code == 204
    trail = _trail(app, enterprise.account_id)
    tokens = [e for e in trail if e["action"].startswith("ingest_token.")]
    assert [(e["action"], e["subject"], e["ip"]) for e in tokens] == [
        ("ingest_token.revoked", token["id"], "203.0.113.5"),
        ("ingest_token.created", token["id"], "203.0.113.5"),
    ]
    assert {e["actor"] for e in tokens} == {f"key:{enterprise.key_ids[Environment.LIVE]}"}
    assert tokens[0]["details"] == {"system_id": system, "display": token["display"]}
    assert token["token"] not in str(trail)


async def test_operator_commands_are_recorded_as_the_operator(app: FastAPI, pro: Tenant) -> None:
    env = settings_env(app.state.settings)
    run_cli(env, "accounts", "set-plan", pro.email, "enterprise")
    run_cli(env, "accounts", "set-plan", pro.email, "enterprise")  # no change, no entry
    key = orjson.loads(run_cli(env, "keys", "create", "--account", pro.email, "--json").stdout)
    run_cli(env, "keys", "revoke", key["id"])
    run_cli(env, "accounts", "set-password", pro.email, "--password", "another long password")
    run_cli(env, "accounts", "disable", pro.email)
    run_cli(env, "accounts", "enable", pro.email)

    trail = _trail(app, pro.email)
    assert [e["action"] for e in trail] == [
        "account.enabled",
        "account.disabled",
        "user.password_changed",
        "key.revoked",
        "key.created",
        "account.plan_changed",
    ]
    assert all(e["actor"].startswith("operator:") and e["ip"] is None for e in trail)
    assert trail[-1]["details"] == {"from": "pro", "to": "enterprise"}
    assert trail[2]["subject"] == pro.email
    assert [e["action"] for e in _trail(app, pro.email, "--limit", "2")] == [
        "account.enabled",
        "account.disabled",
    ]
    text = run_cli(env, "audit", "list", "--account", pro.email).stdout.splitlines()
    assert len(text) == 6
    assert "account.plan_changed" in text[-1]
    assert "from=pro to=enterprise" in text[-1]


async def test_the_trail_of_a_deleted_account_keeps_only_its_deletion(
    app: FastAPI, pro: Tenant
) -> None:
    env = settings_env(app.state.settings)
    run_cli(env, "accounts", "set-plan", pro.email, "enterprise")
    run_cli(env, "accounts", "delete", pro.email, "--yes")
    trail = _trail(app, pro.account_id)
    assert [e["action"] for e in trail] == ["account.deleted"]
    assert trail[0]["subject"] is None
    assert trail[0]["details"]["api_keys"] == "2"
    unknown = run_cli(env, "audit", "list", "--account", pro.email, check=False)
    assert unknown.returncode == 1
