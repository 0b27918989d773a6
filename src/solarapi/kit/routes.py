"""The app's endpoints with their full paths: one walk for the gateway's routing table and
the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute


def iter_routes(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """Every endpoint with its full path, through routers included into routers.

    Recent FastAPI keeps an included router as one lazy entry (`original_router` plus an
    include context carrying the prefix) instead of copying its routes, so a flat walk over
    `router.routes` would miss them and the gateway would answer 404 for real endpoints.
    """
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
            continue
        original = getattr(route, "original_router", None)
        if isinstance(original, APIRouter):
            context = getattr(route, "include_context", None)
            yield from iter_routes(original.routes, prefix + str(getattr(context, "prefix", "")))
