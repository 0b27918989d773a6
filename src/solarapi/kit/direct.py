"""Endpoints the gateway may call directly.

An endpoint marked `@direct` takes the request and its path parameters as plain strings and
returns a Response, with no FastAPI dependency or parameter to solve. The gateway, which has
already routed, authenticated and rate-limited the request, calls it itself instead of
passing the request down FastAPI's router, exception middleware and request handler, which
cost ~0.2 ms of CPU per request (bench/readings/README.md). The route stays a FastAPI route
too: the OpenAPI document and any caller outside the gateway see no difference.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

_MARK = "__solarapi_direct__"

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def direct(endpoint: F) -> F:
    """Mark `endpoint(request=..., **path_params)` as safe to call without FastAPI."""
    setattr(endpoint, _MARK, True)
    return endpoint


def is_direct(endpoint: Callable[..., Any]) -> bool:
    return bool(getattr(endpoint, _MARK, False))
