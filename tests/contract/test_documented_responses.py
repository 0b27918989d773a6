"""Real answers of every operation, checked against the OpenAPI document: the status is one the
operation documents, the media type one it documents for that status, and the JSON body
matches the schema documented for that status, strictly: an object holds no key its schema
leaves out (every documented object is taken as closed), `null` only where the schema allows
it, enums and formats (`date`, `date-time`) checked. Every operation is seen answering 2xx.

Most routes render their own (prebuilt) responses, so FastAPI's `response_model` validates
nothing at run time: this test is what keeps the document and the API the same."""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx
from fastapi import FastAPI
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator

from solarapi.alerts.service import evaluate_system
from solarapi.auth.scopes import API_PREFIX
from solarapi.jobs.runner import run_pending
from solarapi.kit.timefmt import utcnow
from solarapi.reports.service import JOB_KIND as REPORT_JOB
from tests.declarations.factories import create_declaration, make_system, upload_days
from tests.support import Tenant, client_for

WEBHOOK_URL = "https://1.1.1.1/hooks/solar"


def closed(node: Any) -> Any:
    """`node` with every object schema that lists its properties and says nothing of others
    made closed (`additionalProperties: false`): the answer may hold no undocumented key."""
    if isinstance(node, list):
        return [closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    copy = {key: closed(value) for key, value in node.items()}
    open_keys = ("additionalProperties", "patternProperties", "unevaluatedProperties")
    if "properties" in copy and not any(key in copy for key in open_keys):
        copy["additionalProperties"] = False
    return copy


class DocumentedClient:
    """Sends requests and checks each answer against the document; records what it saw."""

    def __init__(self, client: httpx.AsyncClient, document: dict[str, Any]) -> None:
        self.client = client
        self.document = document
        self.components = {"components": closed(document["components"])}
        self.seen: set[tuple[str, str]] = set()
        self.statuses: dict[tuple[str, str], set[int]] = {}

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" not in node:
            return node
        found: Any = self.document
        for part in node["$ref"].removeprefix("#/").split("/"):
            found = found[part]
        return found  # type: ignore[no-any-return]

    def validator(self, schema: dict[str, Any]) -> Validator:
        return Draft202012Validator(
            {**closed(schema), **self.components},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )

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
        media_type = response.headers.get("content-type", "").split(";")[0]
        if status == 204:
            assert not response.content, (method, template)
            assert not content, (method, template)
        else:
            assert media_type in content, (method, template, status, media_type, list(content))
        if media_type == "application/json":
            validator = self.validator(content[media_type]["schema"])
            errors = sorted(validator.iter_errors(response.json()), key=str)
            assert not errors, (
                method, template, status,
                [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5]],
            )  # fmt: skip
        missing = [
            name
            for name, header in documented[str(status)].get("headers", {}).items()
            if self.resolve(header).get("required") and name.lower() not in response.headers
        ]
        assert not missing, (method, template, status, missing)
        self.seen.add((method.lower(), template))
        self.statuses.setdefault((method.lower(), template), set()).add(status)
        return (
            response.json()
            if response.content and "json" in response.headers.get("content-type", "")
            else None
        )


async def answers_of_the_sandbox(api: DocumentedClient, window: dict[str, str]) -> None:
    """The series a sandbox key reads come from the simulators, not the database: their
    answers are checked too."""
    systems = await api.call("GET", "/systems", 200)
    ids = {"system_id": systems["data"][0]["id"]}
    await api.call("GET", "/market-prices", 200, params={"zone": "DE-LU", **window})
    await api.call("GET", "/market-prices", 200, params={"zone": "NL", "interval": "15m", **window})
    for interval in ("15m", "1d"):
        series = {**window, "interval": interval}
        await api.call("GET", "/systems/{system_id}/readings", 200, ids, params=series)
        await api.call("GET", "/systems/{system_id}/market-value", 200, ids, params=series)
        await api.call("GET", "/portfolio/readings", 200, params=series)
        await api.call("GET", "/portfolio/market-value", 200, params=series)
    await api.call("GET", "/systems/{system_id}/summary", 200, ids)
    await api.call("GET", "/systems/{system_id}/irradiance", 200, ids, params=window)
    await api.call("GET", "/systems/{system_id}/performance", 200, ids, params=window)
    await api.call("GET", "/portfolio/summary", 200)


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

        created = await api.call(
            "POST", "/declarations", 201,
            json={"system_id": system["id"], "type": "guarantee_of_origin",
                  "period_start": "2025-05-01", "period_end": "2025-05-02"},
        )  # fmt: skip
        declaration = {"declaration_id": created["id"]}
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
        await run_pending(app.state.sessionmaker, "documented", kinds={REPORT_JOB})
        completed = await api.call("GET", "/reports/{report_id}", 200, ids_report)
        assert completed["status"] == "completed", completed
        await api.call("GET", "/reports/{report_id}/download", 200, ids_report)
        await api.call("DELETE", "/reports/{report_id}", 204, ids_report)

        await api.call("GET", "/events", 200)
        await api.call("GET", "/alerts/{alert_id}", 404, {"alert_id": "alr_unknown"})
        # Its readings stopped long ago: the evaluation opens an offline alert.
        async with app.state.sessionmaker() as session, session.begin():
            await evaluate_system(session, system["id"], utcnow())
        alerts = await api.call("GET", "/alerts", 200)
        assert alerts["data"], alerts
        await api.call("GET", "/alerts/{alert_id}", 200, {"alert_id": alerts["data"][0]["id"]})
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
        await api.call("DELETE", "/systems/{system_id}", 204, {"system_id": zoneless["id"]})
    async with client_for(app, enterprise.test) as sandbox:
        await answers_of_the_sandbox(DocumentedClient(sandbox, document), window)
    async with client_for(app) as anonymous:
        await DocumentedClient(anonymous, document).call("GET", "/account", 401)

    every = {
        (method, path[len(API_PREFIX) :])
        for path, item in document["paths"].items()
        for method in item
    }
    assert not every - api.seen, sorted(every - api.seen)
    never_succeeded = sorted(
        operation
        for operation, statuses in api.statuses.items()
        if not any(200 <= status < 300 for status in statuses)
    )
    assert not never_succeeded, never_succeeded


async def test_the_check_refuses_what_the_document_does_not_say(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The strict check fails on an answer that strays from its schema in any way it checks: a
    key the schema does not list, a `null`, a value outside an enum, a malformed date."""
    async with client_for(app, enterprise.test) as http:
        document = (await http.get(f"{API_PREFIX}/openapi.json")).json()
        api = DocumentedClient(http, document)
        systems = await api.call("GET", "/systems", 200)
        prices = await api.call("GET", "/market-prices", 200, params={"zone": "NL"})
    schemas = document["components"]["schemas"]
    system_schema, price_schema = schemas["SystemList"], schemas["PriceSeries"]
    system = systems["data"][0]
    strays: list[tuple[dict[str, Any], Any]] = [
        (system_schema, {**systems, "data": [{**system, "undocumented": 1}]}),
        (system_schema, {**systems, "data": [{**system, "name": None}]}),
        (system_schema, {**systems, "data": [{**system, "status": "sleeping"}]}),
        (price_schema, {**prices, "data": [{**prices["data"][0], "start": "yesterday"}]}),
        (price_schema, {**prices, "meta": {**prices["meta"], "totals": {}}}),
        (price_schema, {**prices, "meta": {**prices["meta"], "extra": True}}),
    ]
    assert not list(api.validator(system_schema).iter_errors(systems))
    assert not list(api.validator(price_schema).iter_errors(prices))
    for schema, body in strays:
        assert list(api.validator(schema).iter_errors(body)), body
