"""The OpenAPI 3.1 document: FastAPI's, plus the error body, the common error responses and
the headers every response carries."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from solarapi.auth.scopes import API_PREFIX, PUBLIC, required_plan
from solarapi.idempotency.openapi import document_idempotency
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
        "schema": {"type": "string"},
    },
    "API-Version": {"description": "Always 1.0", "schema": {"type": "string"}},
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
_ERROR_HEADERS: dict[str, dict[str, dict[str, Any]]] = {
    "401": {"WWW-Authenticate": {"description": "Always `Bearer`", "schema": {"type": "string"}}},
    "429": {
        "Retry-After": {
            "description": "Seconds until the binding window resets (≥ 1)",
            "schema": {"type": "integer"},
        }
    },
    "503": {
        "Retry-After": {
            "description": "Seconds to wait before retrying",
            "schema": {"type": "integer"},
        }
    },
}

_BODY_ERRORS = {
    "413": "Body over the size limit (`payload_too_large`)",
    "415": "Body that is not `application/json` (`unsupported_media_type`)",
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
            "U+0000, in the URL, the query or a JSON body; timestamps are RFC 3339 with `Z` or "
            "an offset and stay within the years 1–9999 once converted to UTC; time zones are "
            "IANA names of the tz database, at most 64 characters. The server reads URLs up to "
            "8 KiB and request headers up to 32 KiB by default. Error messages quote at most "
            "64 characters of the input."
        ),
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = {
        "type": "object",
        "required": ["error", "code"],
        "additionalProperties": False,
        "properties": {
            "error": {"type": "string", "description": "Human-readable message"},
            "code": {
                "type": "string",
                "enum": [
                    "unauthorized",
                    "forbidden",
                    "rate_limit",
                    "not_found",
                    "validation",
                    "server_error",
                    "method_not_allowed",
                    "conflict",
                    "payload_too_large",
                    "unsupported_media_type",
                    "unavailable",
                ],
            },
        },
    }
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "pk_live_… or pk_test_…"}
    }
    components["headers"] = dict(_HEADERS)
    header_refs = {name: {"$ref": f"#/components/headers/{name}"} for name in _HEADERS}
    for path, operations in schema.get("paths", {}).items():
        relative = path[len(API_PREFIX) :] if path.startswith(API_PREFIX) else path
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
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
            for status, text in errors.items():
                if public and status in ("401", "403"):
                    continue
                responses.setdefault(
                    status,
                    {
                        "description": text,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                )
            for status, response in responses.items():
                headers = response.setdefault("headers", {})
                headers.update(header_refs)
                headers.update(_ERROR_HEADERS.get(status, {}))
    app.openapi_schema = schema
    return schema
