"""Real answers of every operation, checked against the OpenAPI document: the status is one the
operation documents, and the JSON body matches the schema documented for that status.

Most routes render their own (prebuilt) responses, so FastAPI's `response_model` validates
nothing at run time: this test is what keeps the document and the API the same."""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx
from fastapi import FastAPI
from jsonschema import Draft202012Validator

from solarapi.auth.scopes import API_PREFIX
from tests.declarations.factories import create_declaration, make_system, upload_days
from tests.support import Tenant, client_for

WEBHOOK_URL = "https://1.1.1.1/hooks/solar"


class DocumentedClient:
    """Sends requests and checks each answer against the document; records what it saw."""

    def __init__(self, client: httpx.AsyncClient, document: dict[str, Any]) -> None:
        self.client = client
        self.document = document
        self.seen: set[tuple[str, str]] = set()

    async def call(
        self, method: str, template: str, status: int, ids: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        path = template.format(**(ids or {}))
        response = await self.client.request(method, API_PREFIX + path, **kwargs)
        assert response.status_code == status, (method, path, response.text)
        operation = self.document["paths"][API_PREFIX + template][method.lower()]
        documented = operation["responses"]
        assert str(status) in documented, f"{method} {template} answers undocumented {status}"
        content = documented[str(status)].get("content", {})
        if "application/json" in content:
            schema = {**content["application/json"]["schema"], **self._components()}
            errors = sorted(Draft202012Validator(schema).iter_errors(response.json()), key=str)
            assert not errors, (method, template, status, [e.message for e in errors[:3]])
        else:
            assert not response.content or status != 204, (method, template)
        self.seen.add((method.lower(), template))
        return (
            response.json()
            if response.content and "json" in response.headers.get("content-type", "")
            else None
        )

    def _components(self) -> dict[str, Any]:
        return {"components": self.document["components"]}


async def test_every_operation_answers_as_documented(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as http:
        document = (await http.get(f"{API_PREFIX}/openapi.json")).json()
        api = DocumentedClient(http, document)
        await api.call("GET", "/health", 200)
        await api.call("GET", "/health/live", 200)
        await api.call("GET", "/account", 200)
        await api.call("GET", "/market-prices/zones", 200)
        await api.call("GET", "/market-prices", 400)  # zone is required
        window = {"from": "2025-05-01T00:00:00Z", "to": "2025-05-02T00:00:00Z"}
        await api.call("GET", "/market-prices", 200, params={"zone": "NL", **window})

        system = await make_system(http, market_zone="NL")
        ids = {"system_id": system["id"]}
        await upload_days(http, system, date(2025, 5, 1), date(2025, 5, 2))
        await api.call("GET", "/systems", 200)
        await api.call("GET", "/systems/{system_id}", 200, ids)
        await api.call("GET", "/systems/{system_id}", 404, {"system_id": "sys_unknown"})
        await api.call("PATCH", "/systems/{system_id}", 200, ids, json={"name": "Renamed"})
        await api.call("PATCH", "/systems/{system_id}", 400, ids, json={"name": ""})
        await api.call("GET", "/systems/{system_id}/summary", 200, ids)
        await api.call("GET", "/systems/{system_id}/readings", 200, ids, params=window)
        await api.call("GET", "/systems/{system_id}/readings", 400, ids, params={"interval": "2h"})
        reading = {"timestamp": "2025-05-03T00:00:00Z", "energy_wh": 12.5}
        await api.call(
            "POST", "/systems/{system_id}/readings", 200, ids, json={"readings": [reading]}
        )
        await api.call("GET", "/systems/{system_id}/market-value", 200, ids, params=window)
        sun = {"timestamp": "2025-05-01T10:00:00Z", "poa_w_m2": 700.0, "module_temp_c": 35.0}
        await api.call(
            "POST", "/systems/{system_id}/irradiance", 200, ids, json={"readings": [sun]}
        )
        await api.call(
            "POST", "/systems/{system_id}/irradiance", 400, ids,
            json={"readings": [{**sun, "poa_w_m2": 2000}]},
        )  # fmt: skip
        await api.call("GET", "/systems/{system_id}/irradiance", 200, ids, params=window)
        await api.call("GET", "/systems/{system_id}/performance", 200, ids, params=window)
        await api.call(
            "GET", "/systems/{system_id}/performance", 400, ids, params={"interval": "1h"}
        )
        await api.call("GET", "/readings/changes", 200, params={"limit": 5})
        await api.call("GET", "/readings/changes", 400, params={"cursor": "not-a-cursor"})
        await api.call("GET", "/portfolio/readings", 200, params=window)
        await api.call("GET", "/portfolio/readings", 400, params={"limit": "0"})
        await api.call("GET", "/portfolio/readings", 404, params={"system_ids": "sys_unknown"})
        await api.call("GET", "/portfolio/summary", 200)
        await api.call("GET", "/portfolio/market-value", 200, params=window)
        zoneless = await api.call("POST", "/systems", 201, json={
            "name": "No zone", "capacity_kwp": 4.2,
            "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
        })  # fmt: skip
        value = await api.call(
            "GET", "/systems/{system_id}/market-value", 409, {"system_id": zoneless["id"]}
        )
        assert value["code"] == "conflict"  # no market_zone, so no price

        created = await create_declaration(http, system["id"])
        assert created.status_code == 201, created.text
        declaration = {"declaration_id": created.json()["id"]}
        await api.call("GET", "/declarations", 200, params={"status": "draft"})
        await api.call("GET", "/declarations/{declaration_id}", 200, declaration)
        await api.call(
            "PATCH", "/declarations/{declaration_id}", 200, declaration,
            json={"period_end": "2025-05-02"},
        )  # fmt: skip
        await api.call("POST", "/declarations/{declaration_id}/submit", 200, declaration)
        await api.call("GET", "/declarations/{declaration_id}/history", 200, declaration)
        await api.call("DELETE", "/systems/{system_id}", 409, ids)  # a submitted declaration
        await api.call("POST", "/declarations/{declaration_id}/withdraw", 200, declaration)
        await api.call("DELETE", "/declarations/{declaration_id}", 409, declaration)
        draft = await create_declaration(
            http, system["id"], period_start="2025-05-01", period_end="2025-05-02"
        )
        assert draft.status_code == 201, draft.text
        await api.call(
            "POST", "/declarations", 409,
            json={"system_id": system["id"], "type": "guarantee_of_origin",
                  "period_start": "2025-05-01", "period_end": "2025-05-02"},
        )  # fmt: skip
        await api.call(
            "DELETE", "/declarations/{declaration_id}", 204, {"declaration_id": draft.json()["id"]}
        )

        report = await api.call(
            "POST", "/reports", 202,
            json={"type": "production", "format": "csv", **window},
        )  # fmt: skip
        ids_report = {"report_id": report["id"]}
        await api.call("GET", "/reports", 200)
        await api.call("GET", "/reports/{report_id}", 200, ids_report)
        await api.call("GET", "/reports/{report_id}/download", 409, ids_report)
        await api.call("DELETE", "/reports/{report_id}", 204, ids_report)

        await api.call("GET", "/events", 200)
        await api.call("GET", "/alerts", 200)
        await api.call("GET", "/alerts/{alert_id}", 404, {"alert_id": "alr_unknown"})
        hook = await api.call(
            "POST", "/webhooks", 201, json={"url": WEBHOOK_URL, "events": ["system.created"]}
        )
        hook_ids = {"webhook_id": hook["id"]}
        await api.call("GET", "/webhooks", 200)
        await api.call("GET", "/webhooks/{webhook_id}", 200, hook_ids)
        await api.call(
            "PATCH", "/webhooks/{webhook_id}", 200, hook_ids, json={"description": "Ours"}
        )
        await api.call("POST", "/webhooks/{webhook_id}/rotate-secret", 200, hook_ids)
        await api.call("GET", "/webhooks/{webhook_id}/deliveries", 200, hook_ids)
        await api.call("DELETE", "/webhooks/{webhook_id}", 204, hook_ids)

        token = await api.call(
            "POST", "/systems/{system_id}/ingest-tokens", 201, ids, json={"name": "logger"}
        )
        await api.call("POST", "/systems/{system_id}/ingest-tokens", 400, ids, json={"name": ""})
        await api.call("GET", "/systems/{system_id}/ingest-tokens", 200, ids)
        reading = {"timestamp": "2026-01-05T10:00:00Z", "energy_wh": 5.0}
        await api.call(
            "POST", "/ingest/readings", 200, json={"readings": [reading]},
            headers={"Authorization": f"Bearer {token['token']}"},
        )  # fmt: skip
        await api.call("POST", "/ingest/readings", 401, json={"readings": [reading]})
        token_ids = {**ids, "token_id": token["id"]}
        await api.call("DELETE", "/systems/{system_id}/ingest-tokens/{token_id}", 204, token_ids)
        await api.call("DELETE", "/systems/{system_id}/ingest-tokens/{token_id}", 404, token_ids)

        await api.call("DELETE", "/systems/{system_id}", 404, {"system_id": "sys_unknown"})
    async with client_for(app) as anonymous:
        await DocumentedClient(anonymous, document).call("GET", "/account", 401)

    every = {
        (method, path[len(API_PREFIX) :])
        for path, item in document["paths"].items()
        for method in item
    }
    assert not every - api.seen, sorted(every - api.seen)
