"""Endpoints the gateway may call directly.

An endpoint marked `@direct` (one GET, or one POST) takes the request and its path parameters
as plain strings and returns a Response, with no FastAPI dependency or parameter to solve. A
POST that carries an `Idempotency-Key` still takes FastAPI's stack, where the idempotency
middleware claims and stores the key. The gateway, which has
already routed, authenticated and rate-limited the request, calls it itself instead of
passing the request down FastAPI's router, exception middleware and request handler, which
cost ~0.2 ms of CPU per request (bench/readings/README.md). The route stays a FastAPI route
too: the OpenAPI document and any caller outside the gateway see no difference.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from solarapi.kit.openapi_fields import QuerySchema

_MARK = "__solarapi_direct__"
# Where the gateway leaves, in the request's scope, the values of the query parameters the
# route documents (each given once: it answered 400 otherwise), parsed once: `direct_query`.
DIRECT_QUERY = "solarapi.query"

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def direct(endpoint: F) -> F:
    """Mark `endpoint(request=..., **path_params)` as safe to call without FastAPI."""
    setattr(endpoint, _MARK, True)
    return endpoint


def is_direct(endpoint: Callable[..., Any]) -> bool:
    return bool(getattr(endpoint, _MARK, False))


def direct_query(scope: Mapping[str, Any]) -> Mapping[str, str]:
    """The query parameters of a request to a `@direct` endpoint: as the gateway parsed them,
    or (a caller outside the gateway) parsed here."""
    parsed: Mapping[str, str] | None = scope.get(DIRECT_QUERY)
    if parsed is None:
        parsed = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    return parsed


def query_parameter(name: str, description: str, accepts: QuerySchema) -> dict[str, Any]:
    """A query parameter of a `@direct` endpoint, documented in its route's `openapi_extra` as
    a parameter declared with `Query(...)` and a `QuerySchema` is documented: the OpenAPI
    document is the same whichever way the endpoint is called."""
    return {
        "name": name,
        "in": "query",
        "required": accepts.required,
        "schema": dict(accepts.json_schema or {}),
        "description": description,
    }
