"""The SDK's models held to the OpenAPI document the server serves: every field the SDK
declares is in the schema of the answer (or body) it reads (or sends), with the nullability
and presence the SDK assumes; every value of an SDK enum is one the API has, and every enum of
the API in what the SDK models, in the query parameters and in the request bodies is known to
the SDK, value for value. A new field, enum value or model on either side that the other lacks
fails here, not in a user's program."""

from __future__ import annotations

import dataclasses
import keyword
import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import httpx
import pytest

from solarapi_client import errors, fleet, models
from tests.client.conftest import Served

# The document is the same on both databases: read it from the SQLite server only.
pytestmark = pytest.mark.parametrize("client_settings", ["sqlite"], indirect=True)

Schema = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Root:
    """Where a model the SDK decodes (or sends) stands in the document: an operation, the
    answer's status or "request", and the path inside that schema ("data[]": the items of
    `data`). `absent`: fields the SDK fills with their default from this answer (a secret
    shown once). Nested models are reached from these."""

    cls: type
    method: str
    path: str
    status: str = "200"
    inside: str = ""
    absent: frozenset[str] = frozenset()


ROOTS = [
    Root(models.Health, "GET", "/health"),
    Root(models.Liveness, "GET", "/health/live"),
    Root(models.Account, "GET", "/account"),
    Root(models.System, "GET", "/systems/{system_id}"),
    Root(models.System, "POST", "/systems", "201"),
    Root(models.Pagination, "GET", "/systems", inside="pagination"),
    Root(models.Summary, "GET", "/systems/{system_id}/summary"),
    Root(models.Reading, "POST", "/systems/{system_id}/readings", "request", "readings[]"),
    Root(models.UploadResult, "POST", "/systems/{system_id}/readings"),
    Root(models.Reading, "POST", "/ingest/readings", "request", "readings[]"),
    Root(models.UploadResult, "POST", "/ingest/readings"),
    Root(models.ReadingSeries, "GET", "/systems/{system_id}/readings"),
    Root(models.PerformanceSeries, "GET", "/systems/{system_id}/performance"),
    Root(
        models.IrradianceReading, "POST", "/systems/{system_id}/irradiance", "request", "readings[]"
    ),
    Root(models.IrradianceList, "GET", "/systems/{system_id}/irradiance"),
    Root(models.Zone, "GET", "/market-prices/zones", inside="data[]"),
    Root(models.PriceSeries, "GET", "/market-prices"),
    Root(models.MarketValueSeries, "GET", "/systems/{system_id}/market-value"),
    Root(models.Declaration, "GET", "/declarations/{declaration_id}"),
    Root(models.Transition, "GET", "/declarations/{declaration_id}/history", inside="data[]"),
    Root(models.Report, "GET", "/reports/{report_id}"),
    Root(models.Webhook, "POST", "/webhooks", "201"),
    Root(models.Webhook, "POST", "/webhooks/{webhook_id}/rotate-secret"),
    Root(models.Webhook, "GET", "/webhooks/{webhook_id}", absent=frozenset({"secret"})),
    Root(models.Delivery, "GET", "/webhooks/{webhook_id}/deliveries", inside="data[]"),
    Root(models.Event, "GET", "/events", inside="data[]"),
    Root(models.Alert, "GET", "/alerts/{alert_id}"),
    Root(models.Alert, "GET", "/alerts", inside="data[]"),
    Root(models.IngestToken, "POST", "/systems/{system_id}/ingest-tokens", "201"),
    Root(
        models.IngestToken,
        "GET",
        "/systems/{system_id}/ingest-tokens",
        inside="data[]",
        absent=frozenset({"token"}),
    ),
    Root(fleet.FleetReadings, "GET", "/portfolio/readings"),
    Root(fleet.FleetSummary, "GET", "/portfolio/summary"),
    Root(fleet.FleetValue, "GET", "/portfolio/market-value"),
    Root(fleet.ChangePage, "GET", "/readings/changes"),
]
# Models with no schema of their own: the SDK's wrapper of a portfolio page (its `body` is the
# whole answer, checked above as FleetReadings, FleetSummary and FleetValue).
# The pages' wrapper, and a base of two models (`ValueTotals`, `ZoneValueTotals`: read
# through them, each checked against its own schema).
NOT_IN_THE_DOCUMENT = {fleet.FleetPage, models.TraderFigures}
# Enums of the API the SDK keeps as `str` on purpose: market zones and time zones are data
# (`client.market_prices.zones()` lists the zones; a new one needs no new SDK).
DATA_NOT_ENUMS = {"market_zone", "zone", "timezone"}


def _document(served: Served) -> Schema:
    response = httpx.get(f"{served.base_url}/api/v1/openapi.json", timeout=30)
    assert response.status_code == 200
    document: Schema = response.json()
    return document


class Walk:
    """Pairs SDK dataclasses with the schemas they read, collecting every mismatch."""

    def __init__(self, document: Schema) -> None:
        self.document = document
        self.problems: list[str] = []
        self.visited: set[type] = set()

    def resolve(self, schema: Schema) -> tuple[Schema, bool]:
        """The schema behind `$ref`s and `anyOf: [X, null]`, and whether null is allowed."""
        nullable = False
        while True:
            if "$ref" in schema:
                target: Any = self.document
                for step in schema["$ref"].removeprefix("#/").split("/"):
                    target = target[step]
                schema = target
            elif "anyOf" in schema or "oneOf" in schema:
                options = schema.get("anyOf", schema.get("oneOf"))
                real = [option for option in options if option.get("type") != "null"]
                nullable = nullable or len(real) < len(options)
                assert len(real) == 1, f"a union the SDK cannot model: {schema}"
                schema = real[0]
            elif "allOf" in schema and len(schema["allOf"]) == 1:
                schema = schema["allOf"][0]
            else:
                return schema, nullable

    def at(self, schema: Schema, path: str) -> Schema:
        for step in filter(None, path.split(".")):
            schema, _ = self.resolve(schema)
            schema = schema["properties"][step.removesuffix("[]")]
            if step.endswith("[]"):
                schema, _ = self.resolve(schema)
                schema = schema["items"]
        return schema

    def model(
        self,
        cls: type,
        schema: Schema,
        where: str,
        *,
        answer: bool,
        absent: frozenset[str] = frozenset(),
    ) -> None:
        self.visited.add(cls)
        schema, _ = self.resolve(schema)
        properties: Schema = schema.get("properties", {})
        required = set(schema.get("required", []))
        hints = get_type_hints(cls)
        for field in dataclasses.fields(cls):
            key = field.name
            if key.endswith("_") and keyword.iskeyword(key[:-1]):
                key = key[:-1]
            place = f"{cls.__name__}.{field.name} ({where})"
            has_default = (
                field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING
            )
            if key in absent:
                if key in properties or not has_default:
                    self.problems.append(f"{place}: said absent, but it is there or required")
                continue
            if key not in properties:
                self.problems.append(f"{place}: no such field in the schema")
                continue
            hint = hints[field.name]
            prop, nullable = self.resolve(properties[key])
            if answer and nullable and not _optional(hint):
                self.problems.append(f"{place}: the API may send null, the SDK's type has no None")
            if answer and key not in required and not has_default:
                self.problems.append(f"{place}: the API may leave it out, the SDK needs it")
            self.value(hint, prop, place, key, answer=answer)

    def value(self, hint: Any, prop: Schema, place: str, key: str, *, answer: bool) -> None:
        hint = _without_none(hint)
        literal = _literal_values(hint)
        schema_values = _schema_values(prop)
        if literal is not None:
            if schema_values is None:
                self.problems.append(f"{place}: the SDK declares {sorted(literal)}, the API none")
            elif literal != schema_values:
                self.problems.append(
                    f"{place}: the SDK declares {sorted(literal)}, the API {sorted(schema_values)}"
                )
        elif "enum" in prop and key not in DATA_NOT_ENUMS:
            self.problems.append(f"{place}: the API's enum {prop['enum']} is a plain type here")
        origin = get_origin(hint)
        if origin is list:
            (item,) = get_args(hint)
            items, _ = self.resolve(prop.get("items", {}))
            self.value(item, items, place + "[]", key, answer=answer)
        elif dataclasses.is_dataclass(hint):
            self.model(hint, prop, place, answer=answer)  # type: ignore[arg-type]


def _without_none(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
        # `datetime | str` (what an upload accepts): the first is what the API means.
        return args[0]
    return hint


def _optional(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def _literal_values(hint: Any) -> set[str] | None:
    return set(get_args(hint)) if get_origin(hint) is Literal else None


def _schema_values(prop: Schema) -> set[str] | None:
    if "enum" in prop:
        return set(prop["enum"])
    if "const" in prop:
        return {prop["const"]}
    return None


def _operation(document: Schema, method: str, path: str) -> Schema:
    operation: Schema = document["paths"]["/api/v1" + path][method.lower()]
    return operation


def _root_schema(document: Schema, method: str, path: str, status: str) -> Schema:
    operation = _operation(document, method, path)
    part = operation["requestBody"] if status == "request" else operation["responses"][status]
    schema: Schema = part["content"]["application/json"]["schema"]
    return schema


def _sdk_dataclasses() -> set[type]:
    found = set()
    for module in (models, fleet):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                found.add(value)
    return found


def _sdk_enums() -> dict[str, set[str]]:
    return {
        name: set(get_args(value))
        for name, value in vars(models).items()
        if get_origin(value) is Literal
    }


def _enums_in(schema: Any, walk: Walk, name: str = "") -> Iterator[tuple[str, list[str]]]:
    """(field name, values) of every enum in a request body, following references."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            resolved, _ = walk.resolve(schema)
            yield from _enums_in(resolved, walk, name)
            return
        if "enum" in schema:
            yield name, schema["enum"]
        for key, value in schema.items():
            if key == "properties":
                for field, sub in value.items():
                    yield from _enums_in(sub, walk, field)
            else:
                yield from _enums_in(value, walk, name)
    elif isinstance(schema, list):
        for item in schema:
            yield from _enums_in(item, walk, name)


def test_every_model_field_and_enum_is_the_documents(served: Served) -> None:
    document = _document(served)
    walk = Walk(document)
    for root in ROOTS:
        schema = walk.at(_root_schema(document, root.method, root.path, root.status), root.inside)
        where = f"{root.method} {root.path} {root.status} {root.inside}".rstrip()
        walk.model(root.cls, schema, where, answer=root.status != "request", absent=root.absent)
    assert walk.problems == [], "\n".join(walk.problems)
    # Every model of the SDK was held to a schema: a new model needs its root above.
    assert _sdk_dataclasses() - walk.visited - NOT_IN_THE_DOCUMENT == set()
    assert len(walk.visited) >= 50


def test_every_enum_the_api_takes_is_one_of_the_sdks(served: Served) -> None:
    document = _document(served)
    walk = Walk(document)
    sdk = _sdk_enums()
    known = list(sdk.values())
    unknown = []
    taken = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method == "head":
                continue
            sources: list[tuple[str, Any]] = [
                (parameter["name"], parameter.get("schema", {}))
                for parameter in operation.get("parameters", [])
            ]
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                sources.append(("", body["schema"]))
            for name, schema in sources:
                for field, values in _enums_in(schema, walk, name):
                    if field in DATA_NOT_ENUMS:
                        continue
                    taken += 1
                    if set(values) not in known:
                        unknown.append((method.upper(), path, field, values))
    assert unknown == []
    assert taken >= 20  # the walk found the parameters and bodies (a broken one finds none)
    # And each of the SDK's enums is one the API has, somewhere.
    everywhere = [set(values) for _, values in _enums_in(document["components"], walk)]
    everywhere += [set(values) for _, values in _enums_in(document["paths"], walk)]
    assert [name for name, values in sdk.items() if values not in everywhere] == []


def test_every_error_code_of_the_api_has_its_exception(served: Served) -> None:
    codes = _document(served)["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
    assert set(codes) == set(errors.ERRORS_BY_CODE)
