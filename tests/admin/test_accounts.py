"""`solarapi accounts set-password|disable|enable|delete` as an operator runs them, and what
each means for the account's keys, log-ins and dashboard sessions, on both databases."""

from __future__ import annotations

from typing import Any

import orjson
import typer
from fastapi import FastAPI
from sqlalchemy import select, text

from solarapi import cli
from solarapi.jobs.queue import enqueue
from solarapi.kit.plans import Plan
from solarapi.models import Base
from solarapi.models.reports import Report
from tests.dashboard.helpers import browser_for, log_in
from tests.reports.helpers import (
    JUNE_1,
    completed,
    create_report,
    make_system,
    upload_readings,
)
from tests.support import Tenant, client_for, make_tenant, run_cli, settings_env

NEW_PASSWORD = "a brand new passphrase"


async def _logged_in(app: FastAPI, tenant: Tenant) -> Any:
    browser = browser_for(app)
    assert (await log_in(browser, tenant.email, tenant.password)).status_code == 303
    assert (await browser.get("/overview")).status_code == 200
    return browser


async def test_set_password_replaces_the_old_one_and_ends_every_session(
    app: FastAPI, pro: Tenant
) -> None:
    first, second = await _logged_in(app, pro), await _logged_in(app, pro)
    result = run_cli(
        settings_env(app.state.settings),
        "accounts",
        "set-password",
        pro.email,
        "--password",
        NEW_PASSWORD,
    )
    assert "2 dashboard session(s) ended" in result.stdout
    for browser in (first, second):
        page = await browser.get("/overview")
        assert page.status_code == 303
        assert page.headers["location"].startswith("/login")
        await browser.aclose()
    async with browser_for(app) as browser:
        assert (await log_in(browser, pro.email, pro.password)).status_code == 400
        assert (await log_in(browser, pro.email, NEW_PASSWORD)).status_code == 303
    # The API keys are not the password's business: they keep working.
    async with client_for(app, pro.live) as client:
        assert (await client.get("/api/v1/account")).status_code == 200


async def test_set_password_refuses_a_short_one_and_an_unknown_user(
    app: FastAPI, pro: Tenant
) -> None:
    short = run_cli(
        settings_env(app.state.settings),
        "accounts",
        "set-password",
        pro.email,
        "--password",
        "short",
        check=False,
    )
    assert short.returncode == 1
    assert short.stderr.strip() == "error: Password must be at least 10 characters long"
    unknown = run_cli(
        settings_env(app.state.settings), "accounts", "set-password", "nobody@example.com", "--password", NEW_PASSWORD,
        check=False,
    )  # fmt: skip
    assert unknown.returncode == 1
    assert "No user with e-mail 'nobody@example.com'" in unknown.stderr


async def test_disable_refuses_keys_and_log_ins_and_enable_restores_both(
    app: FastAPI, pro: Tenant
) -> None:
    browser = await _logged_in(app, pro)
    env = settings_env(app.state.settings)
    assert "1 dashboard session(s) ended" in run_cli(env, "accounts", "disable", pro.email).stdout
    async with client_for(app, pro.live) as client:
        refused = await client.get("/api/v1/account")
    assert refused.status_code == 401
    assert refused.json() == {
        "error": "this key's account is disabled; its operator can enable it again",
        "code": "unauthorized",
    }
    assert (await browser.get("/overview")).status_code == 303
    answer = await log_in(browser, pro.email, pro.password)
    assert answer.status_code == 403
    assert "This account is disabled" in answer.text
    # Said only to someone who knows the password: a wrong one is the usual refusal.
    wrong = await log_in(browser, pro.email, "not the password at all")
    assert wrong.status_code == 400
    assert "This account is disabled" not in wrong.text
    assert "was already disabled" in run_cli(env, "accounts", "disable", pro.account_id).stdout

    assert f"{pro.account_id} enabled" in run_cli(env, "accounts", "enable", pro.email).stdout
    async with client_for(app, pro.live) as client:
        assert (await client.get("/api/v1/account")).status_code == 200
    assert (await log_in(browser, pro.email, pro.password)).status_code == 303
    await browser.aclose()


async def _rows_naming(app: FastAPI, needles: set[str]) -> list[tuple[str, str]]:
    """Every (table, row) of the database whose text names one of `needles`: the whole
    schema, every column, JSON included — not a list of the tables expected."""
    found = []
    async with app.state.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            for row in await connection.execute(select(table)):
                text = repr(tuple(row))
                if any(needle in text for needle in needles):
                    found.append((table.name, text))
    return found


# A system's measured data: tables without a foreign key to `systems` (migrations 0018 and
# 0019), so a scan by foreign keys would not find them; counted by name.
READINGS_TABLES = ("readings", "reading_hours", "reading_days", "change_batches")


async def _readings_rows(app: FastAPI, system_id: str) -> dict[str, int]:
    counts = {}
    async with app.state.engine.connect() as connection:
        for table in READINGS_TABLES:
            counts[table] = int(
                await connection.scalar(
                    text(f"SELECT count(*) FROM {table} WHERE system_id = :id"),  # noqa: S608
                    {"id": system_id},
                )
            )
        if app.state.settings.is_sqlite:
            # SQLite's packed hours (not a model: emptied by the trigger on `reading_hours`).
            counts["reading_hour_chunks"] = int(
                await connection.scalar(
                    text("SELECT count(*) FROM reading_hour_chunks WHERE system_id = :id"),
                    {"id": system_id},
                )
            )
    return counts


async def test_delete_erases_the_account_and_everything_tied_to_it(app: FastAPI) -> None:
    doomed = await make_tenant(app, Plan.ENTERPRISE)
    bystander = await make_tenant(app, Plan.ENTERPRISE)
    browser = await _logged_in(app, doomed)
    reports_dir = app.state.settings.effective_reports_dir
    async with client_for(app, doomed.live) as client:
        hook = await client.post(
            "/api/v1/webhooks",
            json={"url": "https://1.1.1.1/hooks/solar", "events": ["system.created"]},
            headers={"Idempotency-Key": "erase-me-1"},
        )
        assert hook.status_code == 201, hook.text
        system = await make_system(client, "Roof", "Europe/Amsterdam", market_zone="NL")
        await upload_readings(client, system, JUNE_1, 96)
        report = await create_report(
            client, type="production", format="csv",
            **{"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"},
        )  # fmt: skip
        await completed(client, app, report["id"])
        queued = await create_report(
            client, type="production", format="csv",
            **{"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"},
        )  # fmt: skip
        declaration = await client.post(
            "/api/v1/declarations",
            json={
                "system_id": system["id"],
                "type": "guarantee_of_origin",
                "period_start": "2025-06-01",
                "period_end": "2025-06-01",
            },
        )
        assert declaration.status_code == 201, declaration.text
    async with client_for(app, doomed.test) as client:  # the sandbox: provisioned systems
        assert (await client.get("/api/v1/systems")).status_code == 200
    async with app.state.sessionmaker() as session, session.begin():
        name = (await session.get(Report, report["id"])).file_name  # type: ignore[union-attr]
        # A job of a kind no area knows, naming the account's system: found by its payload.
        await enqueue(session, "test.anything", {"system_id": system["id"]})
    assert (reports_dir / name).is_file()
    async with client_for(app, bystander.live) as client:
        kept = await make_system(client, "Neighbour", "Europe/Berlin")

    needles = {
        doomed.account_id,
        doomed.email,
        system["id"],
        queued["id"],
        *doomed.key_ids.values(),
    }
    assert await _rows_naming(app, needles)  # the scan sees what is there
    stored = await _readings_rows(app, system["id"])
    assert stored["readings"] == 96
    assert stored["change_batches"] >= 1  # the upload's batch (a row per month on PostgreSQL)
    assert stored["reading_hours"] == 24
    assert stored["reading_days"] > 0
    assert stored.get("reading_hour_chunks", 1) > 0

    result = run_cli(
        settings_env(app.state.settings), "accounts", "delete", doomed.email, "--yes", "--json"
    )
    erased = orjson.loads(result.stdout)
    assert erased["id"] == doomed.account_id
    # Each readings table erased row by row and counted, not left to the trigger on systems.
    assert {table: erased["rows"][table] for table in READINGS_TABLES} == {
        table: stored[table] for table in READINGS_TABLES
    }
    assert await _readings_rows(app, system["id"]) == dict.fromkeys(stored, 0)
    assert erased["rows"]["systems"] == 4  # the live one and the sandbox's three
    assert erased["jobs"] >= 3  # the queued report, the webhook delivery, the test job
    assert erased["report_files"] == 1

    left = await _rows_naming(app, needles)
    # One entry says that the account was deleted, by whom: its id, nothing personal.
    assert [table for table, _ in left] == ["audit_events"]
    assert "account.deleted" in left[0][1]
    assert doomed.email not in left[0][1]
    assert not (reports_dir / name).exists()
    assert (await browser.get("/overview")).status_code == 303
    await browser.aclose()
    async with client_for(app, doomed.live) as client:
        assert (await client.get("/api/v1/account")).status_code == 401
    async with client_for(app, bystander.live) as client:
        assert (await client.get(f"/api/v1/systems/{kept['id']}")).status_code == 200
    again = run_cli(
        settings_env(app.state.settings), "accounts", "delete", doomed.email, "--yes", check=False
    )
    assert again.returncode == 1
    assert "No account with e-mail or id" in again.stderr


async def test_delete_asks_first_and_does_nothing_unless_confirmed(app: FastAPI) -> None:
    tenant = await make_tenant(app, Plan.PRO)
    refused = run_cli(
        settings_env(app.state.settings), "accounts", "delete", tenant.email, check=False
    )
    assert refused.returncode == 1
    assert "Erase" in refused.stderr
    assert "Aborted" in refused.stderr
    listed = orjson.loads(
        run_cli(settings_env(app.state.settings), "accounts", "list", "--json").stdout
    )
    assert tenant.account_id in {a["id"] for a in listed}


async def test_demo_refuses_a_database_that_is_not_the_embedded_sqlite(app: FastAPI) -> None:
    env = settings_env(app.state.settings)
    if app.state.settings.is_sqlite:
        assert run_cli(env, "demo", "--no-data", "--json").returncode == 0
        return
    refused = run_cli(env, "demo", "--no-data", check=False)
    assert refused.returncode == 2
    assert "refusing to create demo accounts" in refused.stderr
    assert "--yes-this-is-not-production" in refused.stderr
    listed = orjson.loads(run_cli(env, "accounts", "list", "--json").stdout)
    assert "demo-pro@example.com" not in {a["email"] for a in listed}
    allowed = run_cli(env, "demo", "--no-data", "--json", "--yes-this-is-not-production")
    assert "demo-pro@example.com" in allowed.stdout


async def test_a_disabled_accounts_ingest_tokens_are_refused(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        system = await make_system(api, "Logger roof", "Europe/Amsterdam")
        created = await api.post(
            f"/api/v1/systems/{system['id']}/ingest-tokens", json={"name": "logger"}
        )
        assert created.status_code == 201, created.text
    body = {"readings": [{"timestamp": "2025-06-01T10:00:00Z", "energy_wh": 1.0}]}
    env = settings_env(app.state.settings)
    run_cli(env, "accounts", "disable", enterprise.email)
    async with client_for(app, created.json()["token"]) as logger:
        refused = await logger.post("/api/v1/ingest/readings", json=body)
        assert refused.status_code == 401
        assert "account is disabled" in refused.json()["error"]
        run_cli(env, "accounts", "enable", enterprise.email)
        assert (await logger.post("/api/v1/ingest/readings", json=body)).status_code == 200


async def test_systems_create_and_list_for_an_account(app: FastAPI, pro: Tenant) -> None:
    env = settings_env(app.state.settings)
    created = orjson.loads(
        run_cli(
            env, "systems", "create", "--account", pro.email, "--name", "Barn roof",
            "--capacity-kwp", "12.5", "--latitude", "52.1", "--longitude", "5.2",
            "--timezone", "Europe/Amsterdam", "--market-zone", "NL", "--json",
        ).stdout
    )  # fmt: skip
    assert created["id"].startswith("sys_")
    assert (created["environment"], created["data_source"]) == ("live", "metered")
    listed = orjson.loads(run_cli(env, "systems", "list", "--account", pro.email, "--json").stdout)
    assert [s["id"] for s in listed] == [created["id"]]
    async with client_for(app, pro.live) as client:  # the API sees the same system
        seen = (await client.get(f"/api/v1/systems/{created['id']}")).json()
    assert seen["name"] == "Barn roof"
    assert seen["capacity_kwp"] == 12.5
    bad = run_cli(
        env, "systems", "create", "--account", pro.email, "--name", "X", "--capacity-kwp", "1",
        "--latitude", "95", "--longitude", "5", "--timezone", "localtime", check=False,
    )  # fmt: skip
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: location.latitude")
    assert "Traceback" not in bad.stderr


async def test_systems_create_refuses_with_the_apis_message(
    app: FastAPI, pro: Tenant, enterprise: Tenant
) -> None:
    """The command's message for a bad field is the API's (`POST /systems`): located, and
    without pydantic's "Value error, " prefix."""
    env = settings_env(app.state.settings)
    args = ["--account", pro.email, "--name", "X", "--capacity-kwp", "1", "--latitude", "52"]
    bad = run_cli(
        env, "systems", "create", *args, "--longitude", "5", "--timezone", "Mars/Olympus",
        check=False,
    )  # fmt: skip
    assert bad.returncode == 1
    location = {"latitude": 52, "longitude": 5, "timezone": "Mars/Olympus"}
    async with client_for(app, enterprise.live) as client:
        body = {"name": "X", "capacity_kwp": 1, "location": location}
        api = (await client.post("/api/v1/systems", json=body)).json()["error"]
    assert "Value error" not in bad.stderr
    assert bad.stderr.strip() == f"error: {api}"


def test_set_passwords_prompted_password_is_not_marked_required() -> None:
    """`--password` is asked for when not given (out of the shell's history): an optional
    option with a prompt, so the help does not mark it `[required]` as it did."""
    command: Any = typer.main.get_command(cli.app)  # typer's own click classes
    set_password = command.commands["accounts"].commands["set-password"]
    (password,) = [p for p in set_password.params if p.name == "password"]
    assert password.required is False
    assert password.prompt
    assert password.hide_input
