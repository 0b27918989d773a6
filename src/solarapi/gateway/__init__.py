"""The API gateway: the outermost ASGI layer of every request (`ApiGateway`).

A pure ASGI middleware (no BaseHTTPMiddleware) so it costs microseconds. It runs the
contract's order of checks — routing (404/405) → 429 → 403 → body format → the endpoint
(400 validation → 404 → 409) — one module per concern:

- `request_id`: the request's id (the client's `X-Request-ID` when sane, else a new one);
- `exchange`: one request on its way through (the headers it adds, what its log line says);
- `routing`: the routing table, derived from the app's routes only (`AppRoutes`: nothing is
  added to it by hand; a route the app serves is a route the gateway knows);
- `checks`: the order of the checks, calling `authentication` (the caller's Principal,
  kept while the database is unchanged), `ratelimits` (windows, headers, 429), `plan` (403),
  `query` (a parameter given twice or empty is a 400), `body` (413/415, NUL in JSON), and
  `health` (answered here, never counted);
- `failure`: what escapes the app becomes a 503 (the database cannot serve) or a 500;
- `finish`: the request's session closed, its metrics and its log line;
- `direct`: the `@direct` fast path's dispatch.

The `@direct` fast path — the one way a hot endpoint skips FastAPI's stack:
mark a GET endpoint with `kit.direct_endpoints.direct`; it takes `request` and its path
parameters as keywords, reads its query parameters with
`kit.direct_endpoints.direct_query(request.scope)` (parsed once here, each given at most once
and never empty, documented in the route's `openapi_extra`), and returns a Response. The routing table finds the mark on the app's
route; for a GET or HEAD of that route the gateway, after routing, authentication, rate
limits, plan scope and URL checks, leaves the endpoint in the scope and `DirectDispatch`
(inside the gzip layer) calls it instead of FastAPI's router, exception middleware and
request handler (~0.2 ms of CPU per request less; `bench/readings/README.md`). Its
`ApiError`s are rendered as FastAPI's handlers would; the route stays a FastAPI route, so the
OpenAPI document and any caller outside the gateway see no difference.
"""

from solarapi.gateway.direct import DIRECT, DirectDispatch
from solarapi.gateway.middleware import ApiGateway
from solarapi.gateway.query import parse_query
from solarapi.gateway.routing import AppRoutes, RouteMatch, RouteTable

__all__ = [
    "DIRECT",
    "ApiGateway",
    "AppRoutes",
    "DirectDispatch",
    "RouteMatch",
    "RouteTable",
    "parse_query",
]
