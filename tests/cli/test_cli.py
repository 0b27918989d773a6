"""The operator CLI against a temporary data dir, and its keys used over HTTP."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from solarapi.auth.keys import KEY_PATTERN, parse_key
from solarapi.config import Settings
from solarapi.kit.plans import Environment
from tests.support import client_for, run_cli, running_app, settings_env

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # A fresh install: no secret key configured (the first command makes one).
    env = settings_env(Settings(data_dir=tmp_path, job_runner="external"))
    run_cli(env, "migrate")
    return env


async def test_accounts_and_keys_commands(env: dict[str, str], tmp_path: Path) -> None:
    created = orjson.loads(
        run_cli(
            env,
            "accounts", "create",
            "--name", "Haarlem Solar",
            "--email", "Ops@Example.com",
            "--password", "long enough password",
            "--plan", "pro",
            "--json",
        ).stdout
    )  # fmt: skip
    assert created["id"].startswith("acct_")
    assert created["email"] == "ops@example.com"
    assert created["plan"] == "pro"
    assert created["name"] == "Haarlem Solar"

    duplicate = run_cli(
        env,
        "accounts", "create",
        "--name", "Again",
        "--email", "ops@example.com",
        "--password", "long enough password",
        check=False,
    )  # fmt: skip
    assert duplicate.returncode == 1
    assert "already exists" in duplicate.stderr
    short = run_cli(
        env,
        "accounts", "create", "--name", "X", "--email", "x@example.com", "--password", "short",
        check=False,
    )  # fmt: skip
    assert short.returncode == 1
    assert "at least 10 characters" in short.stderr

    listed = orjson.loads(run_cli(env, "accounts", "list", "--json").stdout)
    assert [(a["id"], a["email"], a["plan"]) for a in listed] == [
        (created["id"], "ops@example.com", "pro")
    ]

    key = orjson.loads(
        run_cli(
            env, "keys", "create", "--account", "ops@example.com", "--env", "test",
            "--name", "CI", "--json",
        ).stdout
    )  # fmt: skip
    assert key["id"].startswith("key_")
    assert KEY_PATTERN.match(key["key"])
    assert parse_key(key["key"]) is Environment.TEST
    assert key["environment"] == "test"
    assert key["name"] == "CI"
    assert key["account_id"] == created["id"]
    assert key["display"] == f"{key['key'][:12]}…{key['key'][-4:]}"
    live = orjson.loads(run_cli(env, "keys", "create", "--account", created["id"], "--json").stdout)
    assert live["key"].startswith("pk_live_")

    keys = run_cli(env, "keys", "list", "--account", "ops@example.com", "--json").stdout
    assert key["key"] not in keys
    assert live["key"] not in keys
    listed_keys = orjson.loads(keys)
    assert {k["id"] for k in listed_keys} == {key["id"], live["id"]}
    assert all(k["revoked_at"] is None for k in listed_keys)

    settings = Settings(data_dir=tmp_path, job_runner="external")
    async with running_app(settings) as app:
        async with client_for(app, key["key"]) as client:
            account = (await client.get("/api/v1/account")).json()
        assert account["plan"] == "pro"
        assert account["environment"] == "test"

        run_cli(env, "accounts", "set-plan", "ops@example.com", "enterprise")
        run_cli(env, "keys", "revoke", live["id"])
        async with client_for(app, key["key"]) as client:
            assert (await client.get("/api/v1/account")).json()["plan"] == "enterprise"
        async with client_for(app, live["key"]) as client:
            assert (await client.get("/api/v1/account")).status_code == 401

    after = orjson.loads(
        run_cli(env, "keys", "list", "--account", "ops@example.com", "--json").stdout
    )
    revoked = {k["id"]: k["revoked_at"] for k in after}
    assert revoked[live["id"]] is not None
    assert revoked[key["id"]] is None
    unknown = run_cli(env, "keys", "revoke", "key_nope", check=False)
    assert unknown.returncode == 1
    assert "No API key" in unknown.stderr
    # A Pro account's key comes without a note; a Starter account's says it has no API access.
    assert "note:" not in run_cli(env, "keys", "create", "--account", "ops@example.com").stderr
    run_cli(
        env,
        "accounts", "create", "--name", "S", "--email", "s@example.com",
        "--password", "long-enough-password",
    )  # fmt: skip
    starter = run_cli(env, "keys", "create", "--account", "s@example.com", "--json")
    assert orjson.loads(starter.stdout)["key"].startswith("pk_live_")
    assert "note: s@example.com is on the Starter plan, which has no API access" in starter.stderr
    assert "solarapi accounts set-plan s@example.com pro" in starter.stderr


async def test_demo_is_idempotent_and_its_keys_work(env: dict[str, str], tmp_path: Path) -> None:
    first = orjson.loads(run_cli(env, "demo", "--json").stdout)
    second = orjson.loads(run_cli(env, "demo", "--json").stdout)
    assert first == second
    # The demo data says what it is: simulated prices for every zone of the demo systems.
    assert first["data"]["prices"]["zones"] == ["DE-LU", "NL"]
    assert first["data"]["prices"]["source"] == "simulated"
    assert "not market data" in first["data"]["prices"]["origin"]
    text = run_cli(env, "demo").stdout
    assert "Day-ahead prices for DE-LU, NL (source 'simulated'): a year up to" in text
    assert "data" not in orjson.loads(run_cli(env, "demo", "--json", "--no-data").stdout)
    plans = {a["plan"]: a for a in first["accounts"]}
    assert set(plans) == {"starter", "pro", "enterprise"}
    for account in first["accounts"]:
        assert set(account["keys"]) == {"live", "test"}
        assert parse_key(account["keys"]["live"]) is Environment.LIVE
        assert parse_key(account["keys"]["test"]) is Environment.TEST
    listed = orjson.loads(run_cli(env, "accounts", "list", "--json").stdout)
    assert len(listed) == 3
    settings = Settings(data_dir=tmp_path, job_runner="external")
    async with running_app(settings) as app:
        for plan, expected in (("enterprise", 200), ("pro", 200), ("starter", 403)):
            async with client_for(app, plans[plan]["keys"]["live"]) as client:
                response = await client.get("/api/v1/account")
            assert response.status_code == expected, plan
            if expected == 200:
                assert response.json()["plan"] == plan
