"""The OpenAPI 3.1 document: FastAPI's, plus the error body, the common error responses and
the headers every response carries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi

from solarapi.auth.scopes import API_PREFIX, PUBLIC, required_plan
from solarapi.errors import ERROR_CODES
from solarapi.idempotency.openapi import document_idempotency
from solarapi.kit.grid import EARLIEST, LATEST
from solarapi.kit.openapi_fields import QuerySchema
from solarapi.kit.routes import iter_routes
from solarapi.kit.timefmt import format_timestamp
from solarapi.kit.version import API_VERSION

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
    declared = _declared_query_schemas(app)
    for path, operations in schema.get("paths", {}).items():
        relative = path[len(API_PREFIX) :] if path.startswith(API_PREFIX) else path
        for method, operation in operations.items():
            if isinstance(operation, dict) and "responses" in operation:
                _state_query_schemas(operation, declared.get((path, method), {}))
                _document_operation(relative, method, operation)
    # FastAPI's 422 (and its error schemas) are never answered: validation errors are 400s.
    _drop_unreferenced(schemas, schema["paths"])
    app.openapi_schema = schema
    return schema


def _document_operation(relative: str, method: str, operation: dict[str, Any]) -> None:
    # One tag: the most specific one (the route's own, after its router's).
    operation["tags"] = operation.get("tags", [])[-1:]
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


def _declared_query_schemas(app: FastAPI) -> dict[tuple[str, str], dict[str, QuerySchema]]:
    """The `QuerySchema` each route declares on its query parameters (its dependencies'
    included), by the route's path and method as the document names them."""
    declared: dict[tuple[str, str], dict[str, QuerySchema]] = {}
    for path, route in iter_routes(app.routes):
        if route.include_in_schema:
            schemas = dict(_query_schemas(route.dependant))
            for method in route.methods or ():
                declared[(path, method.lower())] = schemas
    return declared


def _query_schemas(dependant: Dependant) -> Iterator[tuple[str, QuerySchema]]:
    for param in dependant.query_params:
        for metadata in param.field_info.metadata:
            if isinstance(metadata, QuerySchema):
                yield param.alias, metadata
    for dependency in dependant.dependencies:
        yield from _query_schemas(dependency)


def _state_query_schemas(operation: dict[str, Any], declared: dict[str, QuerySchema]) -> None:
    """Each query parameter's schema exactly as its route declares it: FastAPI adds a title
    and drops the default (the route's default is None, "not given"), and cannot call a
    parameter required that the route refuses itself when missing."""
    for parameter in operation.get("parameters", []):
        accepts = declared.get(parameter["name"]) if parameter.get("in") == "query" else None
        if accepts is not None:
            parameter["required"] = accepts.required
            parameter["schema"] = dict(accepts.json_schema or {})


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
