"""The routing table: every route's path template, methods and query parameters, derived
from the app's own routes, so the gateway answers 404/405 and names the route's template
(for the plan scope table and the metrics) before the app runs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.convertors import Convertor
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, compile_path

from solarapi.auth.scopes import API_PREFIX
from solarapi.kit.bodylimit import declared_body_limit
from solarapi.kit.direct_endpoints import is_direct
from solarapi.kit.routes import iter_routes

DirectEndpoint = Callable[..., Awaitable[Response]]


def _served_paths(routes: Iterable[BaseRoute]) -> Iterator[tuple[str, set[str], APIRoute | None]]:
    """Every path the app serves with its methods: its endpoints (`iter_routes`), its plain
    Starlette routes, and what is mounted (static files: GET and HEAD of any path below)."""
    for route in routes:
        if isinstance(route, Mount):
            yield route.path + "/{path:path}", {"GET", "HEAD"}, None
        elif isinstance(route, APIRoute) or getattr(route, "original_router", None) is not None:
            for path, endpoint in iter_routes([route]):
                yield path, set(endpoint.methods or ()), endpoint
        elif isinstance(route, Route):
            yield route.path, set(route.methods or ()), None


@dataclasses.dataclass(slots=True)
class RouteMatch:
    """`template` is set when the path exists; `allowed` is False when the method does not.
    `endpoint` is set for a GET (or HEAD) or POST of a `@direct` endpoint, with its path
    parameters in `params`. `query` names the query parameters the route's method takes.
    Not frozen (nothing changes one): a frozen dataclass sets each of its seven fields
    through `object.__setattr__`, and every API request makes one."""

    template: str | None
    allowed: bool
    methods: frozenset[str]
    endpoint: DirectEndpoint | None = None
    params: dict[str, Any] | None = None
    query: frozenset[str] = frozenset()
    # The largest body the route's method takes (`kit.bodylimit`); None: the server's limit.
    body_limit: int | None = None

    @property
    def allow_header(self) -> str:
        return ", ".join(sorted(self.methods))


class RouteTable:
    """Path templates and methods of every route of a list of routes (`from_routes`).

    Routes are grouped by their first path segment so a lookup tries a handful of patterns,
    not every route of the API.
    """

    def __init__(self) -> None:
        self._groups: dict[str, list[tuple[re.Pattern[str], str, set[str]]]] = {}
        # (group, slashes, last segment) -> the routes of `_groups[group]` then `_groups["*"]`
        # that can match a path of that many slashes ending in that segment (`_candidates`).
        self._fitting: dict[
            tuple[str, int, str | None], list[tuple[re.Pattern[str], str, set[str]]]
        ] = {}
        # Every template's count of slashes and last segment (None: a parameter in it), or
        # None for a template that matches any number of segments (a `:path` parameter).
        self._shapes: dict[str, tuple[int, str | None] | None] = {}
        self._last_segments: set[str] = set()
        self._most_slashes = 0
        self._templates: dict[str, set[str]] = {}
        # (template, method) -> the endpoint the gateway calls itself (`kit.direct_endpoints`),
        # with its path convertors.
        self._direct: dict[tuple[str, str], tuple[DirectEndpoint, dict[str, Convertor[Any]]]] = {}
        # (template, method) -> the query parameters it takes (`query.parse_query`).
        self._query: dict[tuple[str, str], frozenset[str]] = {}
        # (template, method) -> the largest body it takes (`kit.bodylimit`).
        self._body_limits: dict[tuple[str, str], int] = {}
        # (template, method) -> its methods, query names, body limit and direct endpoint, as
        # `_found` first made them (the table is complete by then: `from_routes`).
        self._found_of: dict[
            tuple[str, str],
            tuple[
                frozenset[str],
                frozenset[str],
                int | None,
                tuple[DirectEndpoint, dict[str, Convertor[Any]]] | None,
            ],
        ] = {}

    @classmethod
    def from_routes(cls, routes: Iterable[BaseRoute]) -> RouteTable:
        """The table of `routes` (an app's `router.routes`): the only way one is filled."""
        table = cls()
        for path, methods, endpoint in _served_paths(routes):
            table._add(path, methods)
            if endpoint is not None:
                table._add_endpoint(path, methods, endpoint)
        return table

    @staticmethod
    def _group(path: str) -> str:
        # "/api/v1/systems/sys_1" -> "systems"; a parameter in that position -> "*".
        relative = path[len(API_PREFIX) :] if path.startswith(API_PREFIX + "/") else path
        first = relative.strip("/").split("/", 1)[0]
        return "*" if "{" in first else first

    def _add(self, template: str, methods: set[str]) -> None:
        methods = {m.upper() for m in methods}
        if "GET" in methods:
            # HEAD is answered for every GET route (the gateway runs GET and drops the body).
            methods.add("HEAD")
        if template in self._templates:
            self._templates[template].update(methods)
            return
        regex, _, _ = compile_path(template)
        self._templates[template] = methods
        self._groups.setdefault(self._group(template), []).append((regex, template, methods))
        self._fitting.clear()
        last = template.rpartition("/")[2]
        if ":path}" in template:
            self._shapes[template] = None
        else:
            slashes = template.count("/")
            self._most_slashes = max(self._most_slashes, slashes)
            self._shapes[template] = (slashes, None if "{" in last else last)
            if "{" not in last:
                self._last_segments.add(last)

    def _candidates(self, path: str) -> list[tuple[re.Pattern[str], str, set[str]]]:
        """The routes `match` tries for `path`, in its order: only those whose template has
        as many slashes as the path and, where its last segment is written out, the path's
        (a parameter matches no `/`, a written segment only itself), and every one with a
        `:path` parameter. Kept per (group, slashes, last segment) — the unknown of each
        folded into one key, so paths nobody routes add none. One regular expression tried
        on a readings request instead of four (~3,000 instructions each)."""
        group = self._group(path)
        if group not in self._groups:
            group = "/"  # (no group's name: a group is a segment)
        slashes = min(path.count("/"), self._most_slashes + 1)
        last: str | None = path.rpartition("/")[2]
        if last not in self._last_segments:
            last = None
        key = (group, slashes, last)
        found = self._fitting.get(key)
        if found is None:
            found = self._fitting[key] = [
                route
                for name in (group, "*")
                for route in self._groups.get(name, ())
                if self._fits(route[1], slashes, last)
            ]
        return found

    def _fits(self, template: str, slashes: int, last: str | None) -> bool:
        shape = self._shapes[template]
        if shape is None:
            return True
        return shape[0] == slashes and (shape[1] is None or shape[1] == last)

    def _add_endpoint(self, path: str, methods: set[str], route: APIRoute) -> None:
        names = _query_names(route)
        for method in methods | ({"HEAD"} if "GET" in methods else set()):
            self._query[(path, method)] = names
        limit = declared_body_limit(route.endpoint)
        if limit is not None:
            for method in methods:
                self._body_limits[(path, method.upper())] = limit
        if is_direct(route.endpoint):
            if methods not in ({"GET"}, {"POST"}):
                raise ValueError(f"@direct is for one GET or POST endpoint: {path} {methods}")
            chosen = (route.endpoint, compile_path(path)[2])
            for method in ("GET", "HEAD") if methods == {"GET"} else ("POST",):
                self._direct[(path, method)] = chosen

    @property
    def templates(self) -> dict[str, frozenset[str]]:
        return {t: frozenset(m) for t, m in self._templates.items()}

    def match(self, path: str, method: str) -> RouteMatch:
        partial: tuple[str, set[str]] | None = None
        # (A path ending in a newline takes every route: `$` matches before it.)
        routes = (
            self._candidates(path)
            if not path.endswith("\n")
            else [
                route for group in (self._group(path), "*") for route in self._groups.get(group, ())
            ]
        )
        for regex, template, methods in routes:
            if matched := regex.match(path):
                if method in methods:
                    return self._found(template, methods, method, matched)
                if partial is None:
                    partial = (template, set(methods))
                else:
                    partial[1].update(methods)
        if partial is None:
            return RouteMatch(None, False, frozenset())
        return RouteMatch(partial[0], False, frozenset(partial[1]))

    def _found(
        self, template: str, methods: set[str], method: str, matched: re.Match[str]
    ) -> RouteMatch:
        key = (template, method)
        found = self._found_of.get(key)
        if found is None:
            # What a (template, method) is found with, looked up once: three dictionaries
            # and a frozenset per request otherwise.
            found = self._found_of[key] = (
                frozenset(methods),
                self._query.get(key, frozenset()),
                self._body_limits.get(key),
                self._direct.get(key),
            )
        frozen, query, limit, direct = found
        if direct is None:
            return RouteMatch(template, True, frozen, query=query, body_limit=limit)
        endpoint, convertors = direct
        params = {
            name: convertors[name].convert(value) for name, value in matched.groupdict().items()
        }
        return RouteMatch(template, True, frozen, endpoint, params, query, limit)


class AppRoutes:
    """The routing table of an app, derived from its routes and derived again when a route
    is added (as tests add theirs after the app is built): one routing truth, the app's.
    The check is the length of the app's route list, so a request pays a `len`."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        self._routes = routes
        self._count = -1
        self._table = RouteTable()

    @property
    def table(self) -> RouteTable:
        if len(self._routes) != self._count:
            self._count = len(self._routes)
            self._table = RouteTable.from_routes(self._routes)
        return self._table

    @property
    def templates(self) -> dict[str, frozenset[str]]:
        return self.table.templates

    def match(self, path: str, method: str) -> RouteMatch:
        # `table`'s check in place (a property read is a Python call, on every request).
        table = self._table if len(self._routes) == self._count else self.table
        return table.match(path, method)


def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters `route` takes: those FastAPI solves, and those a `@direct`
    endpoint documents in its `openapi_extra` (it reads them from the request itself)."""
    names = set(_solved_query_names(route.dependant))
    for param in (route.openapi_extra or {}).get("parameters", []):
        if param.get("in") == "query":
            names.add(param["name"])
    return frozenset(names)


def _solved_query_names(dependant: Dependant) -> Iterator[str]:
    yield from (param.alias for param in dependant.query_params)
    for dependency in dependant.dependencies:
        yield from _solved_query_names(dependency)
