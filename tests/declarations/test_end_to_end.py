"""End to end: a real `solarapi serve` process and the operator CLI on the same database."""

from __future__ import annotations

import json

import httpx
from fastapi import FastAPI

from solarapi.config import Settings
from tests.support import Tenant, run_cli, served, settings_env


async def test_filed_in_the_api_and_decided_by_the_operator(
    app: FastAPI, settings: Settings, enterprise: Tenant
) -> None:
    env = {**settings_env(settings), "SOLARAPI_JOB_RUNNER": "external"}
    headers = {"Authorization": f"Bearer {enterprise.live}"}
    with served(env) as server:
        async with httpx.AsyncClient(base_url=server.base, headers=headers, timeout=30) as client:
            system = await client.post(
                "/api/v1/systems",
                json={
                    "name": "E2E roof",
                    "capacity_kwp": 10.0,
                    "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "UTC"},
                },
            )
            assert system.status_code == 201, system.text
            system_id = system.json()["id"]
            readings = [
                {"timestamp": f"2025-05-01T{h:02d}:{m:02d}:00Z", "energy_wh": 500.0}
                for h in range(24)
                for m in (0, 15, 30, 45)
            ]
            uploaded = await client.post(
                f"/api/v1/systems/{system_id}/readings", json={"readings": readings}
            )
            assert uploaded.status_code == 200, uploaded.text
            created = await client.post(
                "/api/v1/declarations",
                json={
                    "system_id": system_id,
                    "type": "guarantee_of_origin",
                    "period_start": "2025-05-01",
                    "period_end": "2025-05-01",
                },
            )
            assert created.status_code == 201, created.text
            assert created.json()["metered_energy_wh"] == 96 * 500.0
            declaration_id = created.json()["id"]
            submitted = await client.post(f"/api/v1/declarations/{declaration_id}/submit")
            assert submitted.json()["status"] == "submitted"

            decided = run_cli(
                env, "declarations", "decide", declaration_id, "--reject", "--reason", "E2E",
                "--json",
            )  # fmt: skip
            assert json.loads(decided.stdout)["status"] == "rejected"

            seen = await client.get(f"/api/v1/declarations/{declaration_id}")
            assert seen.json()["status"] == "rejected"
            assert seen.json()["status_reason"] == "E2E"
