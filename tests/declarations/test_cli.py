"""`solarapi declarations decide|pending`: the operator's side, as a real subprocess."""

from __future__ import annotations

import json
from datetime import date

from fastapi import FastAPI

from solarapi.config import Settings
from solarapi.kit.plans import Environment
from tests.declarations.factories import (
    MAY_1,
    create_declaration,
    make_system,
    upload_days,
)
from tests.support import Tenant, client_for, run_cli, settings_env


async def test_operator_decides_from_the_command_line(
    app: FastAPI, settings: Settings, enterprise: Tenant
) -> None:
    env = settings_env(settings)
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, capacity_kwp=1000.0)
        await upload_days(client, system, MAY_1, date(2025, 5, 2), scale=100.0)
        declaration = (await create_declaration(client, system["id"], energy_wh=3_500_000.0)).json()
        path = f"/api/v1/declarations/{declaration['id']}"
        await client.post(f"{path}/submit")

        pending = run_cli(env, "declarations", "pending", "--json")
        assert declaration["id"] in {d["id"] for d in json.loads(pending.stdout)}

        no_reason = run_cli(
            env, "declarations", "decide", declaration["id"], "--reject", check=False
        )
        assert no_reason.returncode == 2
        assert "--reason" in no_reason.stderr
        assert (await client.get(path)).json()["status"] == "submitted"

        decided = run_cli(
            env,
            "declarations",
            "decide",
            declaration["id"],
            "--approve",
            "--reason",
            "ok",
            "--json",
        )
        payload = json.loads(decided.stdout)
        assert payload["status"] == "approved"
        assert payload["certificates"] == 3

        fetched = (await client.get(path)).json()
        assert fetched["status"] == "approved"
        assert fetched["status_reason"] == "ok"
        assert fetched["certificates"] == 3
        history = (await client.get(f"{path}/history")).json()["data"]
        assert (history[-1]["actor"], history[-1]["action"]) == ("operator", "approve")
        assert history[-2]["actor"] == enterprise.key_ids[Environment.LIVE]

        again = run_cli(
            env,
            "declarations",
            "decide",
            declaration["id"],
            "--reject",
            "--reason",
            "x",
            check=False,
        )
        assert again.returncode == 1
        assert "'approved'" in again.stderr

        unknown = run_cli(
            env, "declarations", "decide", "dcl_01JD000000000000000000000", "--approve", check=False
        )
        assert unknown.returncode == 1
        assert "No declaration" in unknown.stderr
