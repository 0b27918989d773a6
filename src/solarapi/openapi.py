"""The OpenAPI 3.1 document: FastAPI's, plus the error body, the common error responses and
the headers every response carries."""

from __future__ import annotations

from typing import Any, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from solarapi.auth.scopes import API_PREFIX, PUBLIC, required_plan
from solarapi.declarations.schemas import DECLARATION_TYPES
from solarapi.declarations.statemachine import DeclarationStatus
from solarapi.errors import ERROR_CODES
from solarapi.events.types import EVENT_TYPES
from solarapi.idempotency.openapi import document_idempotency
from solarapi.kit.grid import ALL_INTERVALS, EARLIEST, LATEST
from solarapi.kit.pagination import DEFAULT_LIMIT, MAX_LIMIT, MAX_PAGE
from solarapi.kit.timefmt import format_timestamp
from solarapi.kit.version import API_VERSION
from solarapi.kit.zones import ZONES
from solarapi.models.alerts import ALERT_STATUSES, ALERT_TYPES
from solarapi.models.reports import ReportKind, ReportStatus
from solarapi.prices.service import PRICE_INTERVALS
from solarapi.systems.schemas import Status as SystemStatus

_ERRORS = {
    "400": "Invalid parameters or body (`validation`)",
    "401": "Missing, malformed, unknown or revoked key (`unauthorized`)",
    "403": "The plan does not cover this operation (`forbidden`)",
    "404": "Unknown id, another account's or environment's object (`not_found`)",
    "429": "Rate limit exceeded (`rate_limit`); see `Retry-After`",
    "500": "Unexpected failure (`server_error`), logged with the request id",
    "503": "Database unreachable (`unavailable`); see `Retry-After`",
}

_HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {
        "description": "The client's own id when well-formed, else req_<ULID>",
        "required": True,
        "schema": {"type": "string"},
    },
    "API-Version": {"description": "Always 1.0", "required": True, "schema": {"type": "string"}},
    "X-RateLimit-Limit": {
        "description": "Limit of the binding window (fewest left)",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining": {
        "description": "Requests left in the binding window",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Reset": {
        "description": "Unix epoch seconds when the binding window resets",
        "schema": {"type": "integer"},
    },
    "RateLimit-Policy": {
        "description": 'IETF draft: the windows, e.g. "minute";q=60;w=60',
        "schema": {"type": "string"},
    },
    "X-RateLimit-Limit-Minute": {
        "description": "Limit of the minute window",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining-Minute": {
        "description": "Requests left in the minute window",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Limit-Day": {
        "description": "Limit of the day window (keys only)",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining-Day": {
        "description": "Requests left in the day window (keys only)",
        "schema": {"type": "integer"},
    },
    "RateLimit": {"description": 'IETF draft: "minute";r=41;t=17', "schema": {"type": "string"}},
}

# Headers that only some error responses carry.
# Public routes the gateway answers without consulting any rate-limit window.
_UNCOUNTED = frozenset({"/health/live"})
# The headers every answer carries, counted or not.
_ALWAYS_HEADERS = frozenset({"X-Request-Id", "API-Version"})

_ERROR_HEADERS: dict[str, dict[str, dict[str, Any]]] = {
    "401": {
        "WWW-Authenticate": {
            "description": "Always `Bearer`",
            "required": True,
            "schema": {"type": "string"},
        }
    },
    "429": {
        "Retry-After": {
            "description": "Seconds until the binding window resets (≥ 1)",
            "required": True,
            "schema": {"type": "integer"},
        }
    },
    "503": {
        "Retry-After": {
            "description": "Seconds to wait before retrying",
            "required": True,
            "schema": {"type": "integer"},
        }
    },
}

_BODY_ERRORS = {
    "413": "Body over the size limit (`payload_too_large`)",
    "415": "Body that is not `application/json` (`unsupported_media_type`)",
}


_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "code"],
    "additionalProperties": False,
    "properties": {
        "error": {"type": "string", "description": "Human-readable message"},
        "code": {"type": "string", "enum": list(ERROR_CODES)},
    },
}


def _enum(values: Any) -> dict[str, Any]:
    return {"type": "string", "enum": [str(value) for value in values]}


# JSON Schema cannot bound a date-time; the bounds are stated where a client reads them.
_INSTANT = {
    "type": "string",
    "format": "date-time",
    "description": (
        f"RFC 3339 with `Z` or an offset, from {format_timestamp(EARLIEST)} to "
        f"{format_timestamp(LATEST)} (400 `validation` outside)"
    ),
    "examples": [format_timestamp(EARLIEST)],
}
# What each query parameter accepts. The routes declare them as optional strings (they are
# parsed by hand, for the contract's messages); here the document says exactly what passes.
_PARAMETERS: dict[str, dict[str, Any]] = {
    "page": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
    "from": _INSTANT,
    "to": _INSTANT,
    "interval": _enum(ALL_INTERVALS),
    "market_zone": _enum(ZONES),
    "zone": _enum(ZONES),
    # Given empty, a 400 from the gateway (`parse_query`), like every parameter.
    "system_id": {"type": "string", "minLength": 1, "maxLength": 40},
}
_PORTFOLIO_PARAMETERS: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 1_000, "default": 100},
    "status": _enum(get_args(SystemStatus)),
    "system_ids": {
        "type": "string",
        "pattern": "^[^,\\u0000]+(,[^,\\u0000]+)*$",
        "description": "Comma-separated system ids, 1–1,000, each at most once (a repeated "
        "id → 400; an id that is not yours → 404 naming it)",
    },
}
_OPERATION_PARAMETERS: dict[tuple[str, str], dict[str, Any]] = {
    ("/market-prices", "interval"): _enum(PRICE_INTERVALS),
    ("/systems/{system_id}/performance", "interval"): _enum(("1d", "1w", "1M")),
    ("/systems", "status"): _enum(get_args(SystemStatus)),
    ("/declarations", "status"): _enum(DeclarationStatus),
    ("/declarations", "type"): _enum(DECLARATION_TYPES),
    ("/reports", "status"): _enum(ReportStatus),
    ("/reports", "type"): _enum(ReportKind),
    ("/events", "type"): _enum(EVENT_TYPES),
    ("/readings/changes", "cursor"): {
        "type": "string",
        "pattern": "^[A-Za-z0-9_-]{55}$",
        "description": "`next_cursor` of an earlier answer to this key's account and "
        "environment, at most 30 days old (else 400)",
    },
    ("/readings/changes", "limit"): {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000,
        "default": 1_000,
        "description": "1–10,000 (default 1,000); with `Accept: application/x-ndjson` "
        "1–100,000 (default 100,000)",
    },
    **{
        (f"/portfolio/{name}", parameter): schema
        for name in ("readings", "summary", "market-value")
        for parameter, schema in _PORTFOLIO_PARAMETERS.items()
    },
    ("/portfolio/readings", "interval"): {**_enum(ALL_INTERVALS), "default": "1d"},
    ("/portfolio/market-value", "interval"): {**_enum(ALL_INTERVALS), "default": "1d"},
    ("/alerts", "status"): _enum(ALERT_STATUSES),
    ("/alerts", "type"): _enum(ALERT_TYPES),
}
_REQUIRED_PARAMETERS = {("/market-prices", "zone")}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title="Solar Energy Platform API",
        version=API_VERSION,
        openapi_version="3.1.0",
        description=(
            "Programmatic access to your solar systems, their energy readings, electricity "
            "market prices, declarations and reports.\n\n"
            "Authenticate with `Authorization: Bearer <key>`. Keys start with `pk_live_` "
            "(production) or `pk_test_` (sandbox, simulated data). **Both are secret keys** — "
            "unlike Stripe's `pk_`, nothing here is publishable; never put a key in a browser "
            "or an app.\n\n"
            "Input rules for every endpoint (each a `400 validation`): strings never contain "
            "U+0000, in the URL, the query or a JSON body; a query parameter the endpoint takes "
            "is given at most once and never empty (leave it out for its default; parameters "
            "it does not take are ignored); timestamps are RFC 3339 with `Z` or "
            "an offset and stay within the years 1–9999 once converted to UTC; time ranges "
            f"(`from`/`to`) lie between {format_timestamp(EARLIEST)} and "
            f"{format_timestamp(LATEST)}, and readings and declaration periods start no earlier "
            f"than {format_timestamp(EARLIEST)}; time zones are "
            "IANA names of the tz database, at most 64 characters. The server reads URLs up to "
            "8 KiB and request headers up to 32 KiB by default. Error messages quote at most "
            "64 characters of the input."
        ),
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = _ERROR_SCHEMA
    _no_nul(schemas)
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "pk_live_… or pk_test_…"}
    }
    components["headers"] = dict(_HEADERS)
    for path, operations in schema.get("paths", {}).items():
        relative = path[len(API_PREFIX) :] if path.startswith(API_PREFIX) else path
        for method, operation in operations.items():
            if isinstance(operation, dict) and "responses" in operation:
                _document_operation(relative, method, operation)
    # FastAPI's 422 (and its error schemas) are never answered: validation errors are 400s.
    _drop_unreferenced(schemas, schema["paths"])
    app.openapi_schema = schema
    return schema


def _document_operation(relative: str, method: str, operation: dict[str, Any]) -> None:
    # One tag: the most specific one (the route's own, after its router's).
    operation["tags"] = operation.get("tags", [])[-1:]
    _precise_parameters(relative, operation)
    responses = operation["responses"]
    responses.pop("422", None)
    public = relative in PUBLIC
    if not public:
        operation["security"] = [{"bearer": []}]
        plan = required_plan(method.upper(), relative)
        operation["x-required-plan"] = plan.value
        if method == "post":
            document_idempotency(operation)
        operation["description"] = (
            operation.get("description", "") + f"\n\nRequires the **{plan.value}** plan."
        ).strip()
    errors = dict(_ERRORS)
    if "requestBody" in operation:
        errors.update(_BODY_ERRORS)
    # /health/live consults no window (it must answer while Redis does not): no rate-limit
    # headers, never a 429.
    uncounted = relative in _UNCOUNTED
    for status, text in errors.items():
        if (public and status in ("401", "403")) or (uncounted and status == "429"):
            continue
        responses.setdefault(status, {"description": text})
    header_refs = {
        name: {"$ref": f"#/components/headers/{name}"}
        for name in _HEADERS
        if not (uncounted and name not in _ALWAYS_HEADERS)
    }
    for status, response in responses.items():
        if status.startswith(("4", "5")):
            # Every error answer has the one body, whatever the router declared.
            response["content"] = {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
            }
        headers = response.setdefault("headers", {})
        headers.update(header_refs)
        headers.update(_ERROR_HEADERS.get(status, {}))
    _no_nul(operation.get("parameters", []))


def _drop_unreferenced(schemas: dict[str, Any], paths: dict[str, Any]) -> None:
    """Remove the component schemas no operation reaches, directly or through others."""
    reached: set[str] = set()
    pending = _references(paths)
    while pending:
        name = pending.pop()
        if name not in reached and name in schemas:
            reached.add(name)
            pending |= _references(schemas[name])
    for name in set(schemas) - reached:
        del schemas[name]


def _references(node: Any) -> set[str]:
    prefix = "#/components/schemas/"
    if isinstance(node, dict):
        found = (
            {node["$ref"][len(prefix) :]} if str(node.get("$ref", "")).startswith(prefix) else set()
        )
        for value in node.values():
            found |= _references(value)
        return found
    if isinstance(node, list):
        return set().union(*(_references(item) for item in node)) if node else set()
    return set()


def _precise_parameters(relative: str, operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        name = parameter["name"]
        precise = _OPERATION_PARAMETERS.get((relative, name)) or _PARAMETERS.get(name)
        if precise is None:
            continue
        parameter["schema"] = dict(precise)
        parameter["required"] = (relative, name) in _REQUIRED_PARAMETERS


# No string of the API holds U+0000: the gateway refuses it in the URL, the query and JSON
# bodies (kit.text). Each free-text string says so; enums, patterns and formats already exclude it.
NO_NUL = "^[^\\u0000]*$"


def _no_nul(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string" and not {"enum", "const", "pattern", "format"} & set(node):
            node["pattern"] = NO_NUL
        for value in node.values():
            _no_nul(value)
    elif isinstance(node, list):
        for item in node:
            _no_nul(item)
