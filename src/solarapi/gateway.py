"""The API gateway middleware: request ids, version header, authentication, rate limits,
plan scope, body limits and the error shape for anything that escapes the app.

A pure ASGI middleware (no BaseHTTPMiddleware) so it costs microseconds. It runs the
contract's order of checks: routing (404/405) → 429 → 403 → body format → the endpoint
(400 validation → 404 → 409).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.convertors import Convertor
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from solarapi.auth.principal import Principal
from solarapi.auth.scopes import API_PREFIX, PUBLIC, forbidden_message, plan_allows
from solarapi.auth.service import authenticate, key_hash, needs_touch
from solarapi.db import DATA_VERSION, REQUEST_SESSION, committed_version, is_outage, untouched
from solarapi.errors import (
    ApiError,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    ValidationFailed,
    error_response,
    render_api_error,
)
from solarapi.health.service import health_response
from solarapi.kit import clientip
from solarapi.kit.direct import DIRECT_QUERY, is_direct
from solarapi.kit.ids import new_id
from solarapi.kit.plans import PLAN_LIMITS
from solarapi.kit.text import NUL_MESSAGE, JsonNulScanner, excerpt, url_has_nul
from solarapi.kit.version import API_VERSION
from solarapi.ratelimit.base import Decision
from solarapi.ratelimit.policy import (
    anonymous_windows,
    key_windows,
    limit_message,
    rate_limit_headers,
)

_API_VERSION = API_VERSION.encode()

log = logging.getLogger("solarapi.request")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_RATE_LIMIT_HEADER = b"x-ratelimit-limit"
# Where the gateway leaves a `@direct` endpoint and its path parameters for `DirectDispatch`.
DIRECT = "solarapi.direct"

DirectEndpoint = Callable[..., Awaitable[Response]]


class _Refused(RateLimited):
    """A 429 that names the window that refused it and the caller, for the metrics."""

    def __init__(self, message: str, retry_after: int, window: str, caller: str) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        self.window = window
        self.caller = caller


class _BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body exceeds the limit of {limit} bytes")


class _NulInBody(HTTPException):
    # An HTTPException, like _BodyTooLarge: raised while the app reads the body, it reaches
    # the app's handlers (FastAPI re-raises HTTPExceptions from body reading).
    def __init__(self) -> None:
        super().__init__(400, f"request body: {NUL_MESSAGE}")


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


@dataclasses.dataclass(frozen=True, slots=True)
class RouteMatch:
    """`template` is set when the path exists; `allowed` is False when the method does not.
    `endpoint` is set for a GET (or HEAD) of a `@direct` endpoint, with its path parameters
    in `params`. `query` names the query parameters the route's method takes."""

    template: str | None
    allowed: bool
    methods: frozenset[str]
    endpoint: DirectEndpoint | None = None
    params: dict[str, Any] | None = None
    query: frozenset[str] = frozenset()

    @property
    def allow_header(self) -> str:
        return ", ".join(sorted(self.methods))


class RouteTable:
    """Path templates and methods of every route, so the gateway can answer 404/405 and name
    the route's template for the plan scope table before the app runs.

    Routes are grouped by their first path segment so a lookup tries a handful of patterns,
    not every route of the API.
    """

    def __init__(self) -> None:
        self._groups: dict[str, list[tuple[re.Pattern[str], str, set[str]]]] = {}
        self._templates: dict[str, set[str]] = {}
        # GET endpoints the gateway calls itself (`kit.direct`), with their path convertors.
        self._direct: dict[str, tuple[DirectEndpoint, dict[str, Convertor[Any]]]] = {}
        # (template, method) -> the query parameters it takes (`parse_query`).
        self._query: dict[tuple[str, str], frozenset[str]] = {}

    @staticmethod
    def _group(path: str) -> str:
        # "/api/v1/systems/sys_1" -> "systems"; a parameter in that position -> "*".
        relative = path[len(API_PREFIX) :] if path.startswith(API_PREFIX + "/") else path
        first = relative.strip("/").split("/", 1)[0]
        return "*" if "{" in first else first

    def add(self, template: str, methods: set[str]) -> None:
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

    def add_router(self, router: APIRouter, prefix: str) -> None:
        for path, route in iter_routes(router.routes, prefix):
            methods = set(route.methods or ())
            self.add(path, methods)
            names = _query_names(route)
            for method in methods | ({"HEAD"} if "GET" in methods else set()):
                self._query[(path, method)] = names
            if is_direct(route.endpoint):
                if methods != {"GET"}:
                    raise ValueError(f"@direct is for GET endpoints only: {path} {methods}")
                self._direct[path] = (route.endpoint, compile_path(path)[2])

    @property
    def templates(self) -> dict[str, frozenset[str]]:
        return {t: frozenset(m) for t, m in self._templates.items()}

    def match(self, path: str, method: str) -> RouteMatch:
        partial: tuple[str, set[str]] | None = None
        for group in (self._group(path), "*"):
            for regex, template, methods in self._groups.get(group, ()):
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
        query = self._query.get((template, method), frozenset())
        direct = self._direct.get(template) if method in ("GET", "HEAD") else None
        if direct is None:
            return RouteMatch(template, True, frozenset(methods), query=query)
        endpoint, convertors = direct
        params = {
            name: convertors[name].convert(value) for name, value in matched.groupdict().items()
        }
        return RouteMatch(template, True, frozenset(methods), endpoint, params, query)


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


def parse_query(query_string: bytes, names: frozenset[str]) -> tuple[dict[str, str], str | None]:
    """The values of the query parameters the route takes (parsed once: a `@direct` endpoint
    is handed them), and the problem that is a 400: one of them given twice or given empty,
    never a silent pick of one value or of the default (`?to=` from a client whose variable
    was empty would otherwise read the last 24 hours as if asked). Other parameters are
    ignored."""
    values: dict[str, str] = {}
    if not query_string or not names:
        return values, None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name not in names:
            continue
        if name in values:
            return values, f"query parameter '{name}' is given more than once; give it once"
        if value == "":
            return values, f"query parameter '{name}' is empty; leave it out for its default"
        values[name] = value
    return values, None


@dataclasses.dataclass(slots=True)
class _Exchange:
    """One request on its way through the gateway: what it adds to the response and what
    its log line reports."""

    scope: Scope
    state: Any  # the app's State
    downstream: Send
    method: str  # as the client sent it: a HEAD runs the app as GET
    headers: Headers
    request_id: str
    client_ip: str
    started: float
    # Added to the response's head: request id, API version, the rate-limit windows.
    extra: list[tuple[bytes, bytes]]
    route: str = "-"
    status: int = 500
    response_started: bool = False

    @classmethod
    def begin(cls, scope: Scope, send: Send) -> _Exchange:
        started = time.perf_counter()
        state = scope["app"].state
        headers = Headers(scope=scope)
        incoming = headers.get("x-request-id")
        request_id = incoming if incoming and _REQUEST_ID.fullmatch(incoming) else new_id("req")
        scope.setdefault("state", {})["request_id"] = request_id
        return cls(
            scope=scope,
            state=state,
            downstream=send,
            method=scope["method"],
            headers=headers,
            request_id=request_id,
            client_ip=clientip.client_ip(scope, state.settings.trusted_networks),
            started=started,
            extra=[(b"x-request-id", request_id.encode()), (b"api-version", _API_VERSION)],
        )

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.response_started = True
            self.status = message["status"]
            message["headers"] = [*message.get("headers", []), *self.extra]
        elif message["type"] == "http.response.body" and self.method == "HEAD":
            # A HEAD response never has a body; the app ran GET (FastAPI's routes do not
            # answer HEAD themselves), its body is dropped here.
            message = {**message, "body": b""}
        await self.downstream(message)

    async def peek_anonymous(self) -> None:
        """The client IP's window, for its headers only (dashboard pages, and errors raised
        before any window was consulted)."""
        state = self.state
        decision = await state.limiter.peek(
            f"ip:{self.client_ip}", anonymous_windows(state.settings), state.clock()
        )
        self.extra.extend(rate_limit_headers(decision))


class ApiGateway:
    """The outermost layer of every request (see `create_app`): it answers routing, key,
    limit, plan and body errors and /health itself, and runs the app for the rest."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange.begin(scope, send)
        try:
            await self._answer(exchange, receive)
        except Exception as exc:
            await _answer_failure(exchange, exc, receive)
        finally:
            await _finish(exchange)

    async def _answer(self, exchange: _Exchange, receive: Receive) -> None:
        scope = exchange.scope
        if not scope["path"].startswith("/api/"):
            # Dashboard pages: not limited here, but they carry the anonymous window's
            # headers like every other response.
            await exchange.peek_anonymous()
            await self.app(scope, receive, exchange.send)
            return
        checks = _Checks(exchange, exchange.state.clock())
        answer, receive = await checks.gate(receive)
        if answer is not None:
            await answer(scope, receive, exchange.send)
            return
        if scope["method"] == "HEAD":
            scope["method"] = "GET"
        await self.app(scope, receive, exchange.send)


class DirectDispatch:
    """Runs a `@direct` endpoint the gateway chose (scope[DIRECT]) in place of `app`, the
    FastAPI stack, turning its `ApiError`s into their responses as FastAPI's exception
    middleware would; anything else escapes to the gateway, as it does from FastAPI's.
    It sits inside the gzip layer, so responses are compressed alike on both paths."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        chosen = scope.get(DIRECT)
        if chosen is None:
            await self.app(scope, receive, send)
            return
        endpoint, params = chosen
        try:
            response = await endpoint(request=Request(scope, receive), **params)
        except ApiError as exc:
            response = render_api_error(exc)
        await response(scope, receive, send)


async def _answer_failure(exchange: _Exchange, exc: Exception, receive: Receive) -> None:
    """An exception escaped the app: 503 when the database cannot serve, else 500."""
    request_id = exchange.request_id
    if exchange.response_started:
        log.exception("error after the response started", extra={"request_id": request_id})
        return
    if not any(name == _RATE_LIMIT_HEADER for name, _ in exchange.extra):
        await exchange.peek_anonymous()
    state = exchange.state
    if await is_outage(exc, state.engine):
        if state.metrics is not None:
            state.metrics.database_down()
        log.error("database unavailable: %s", type(exc).__name__, extra={"request_id": request_id})
        response = render_api_error(Unavailable())
    else:
        log.exception("unhandled error", extra={"request_id": request_id})
        response = error_response(
            500,
            "server_error",
            f"Internal server error; quote request id {request_id} when reporting it",
        )
    await response(exchange.scope, receive, exchange.send)


async def _finish(exchange: _Exchange) -> None:
    """Close the request's session, record the metrics and write the request's log line."""
    scope, state = exchange.scope, exchange.state
    scope_state = scope["state"]
    session = scope_state.pop(REQUEST_SESSION, None)
    if session is not None and not untouched(session):
        try:
            await session.close()
        except Exception:
            log.exception(
                "closing the request's session", extra={"request_id": exchange.request_id}
            )
    elapsed = time.perf_counter() - exchange.started
    route = exchange.route
    if state.metrics is not None:
        api = route != "-" or scope["path"].startswith("/api/")
        state.metrics.request(
            route if api else "dashboard", exchange.method, exchange.status, elapsed
        )
    if not log.isEnabledFor(logging.INFO):
        return
    principal = scope_state.get("principal")
    caller = principal if isinstance(principal, Principal) else None
    log.info(
        "request",
        extra={
            "request_id": exchange.request_id,
            "method": exchange.method,
            "route": route,
            "path": scope["path"],
            "status": exchange.status,
            "latency_ms": round(elapsed * 1000, 2),
            "key_id": caller.key_id if caller else None,
            "key": caller.key_display if caller else None,
            "account_id": caller.account_id if caller else None,
            "client_ip": exchange.client_ip,
        },
    )


def _check_body(
    scope: Scope, headers: Headers, receive: Receive, max_bytes: int
) -> tuple[ApiError | None, Receive]:
    if scope["method"] not in _BODY_METHODS:
        return None, receive
    length_header = headers.get("content-length")
    chunked = headers.get("transfer-encoding", "").lower() == "chunked"
    length = int(length_header) if length_header and length_header.isdigit() else 0
    if length > max_bytes:
        return PayloadTooLarge(f"Request body exceeds the limit of {max_bytes} bytes"), receive
    if length or chunked:
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            return (
                UnsupportedMediaType(
                    f"Request bodies must be JSON (Content-Type: application/json); "
                    f"got '{excerpt(content_type or 'none')}'"
                ),
                receive,
            )
    received = 0
    nul_scanner = JsonNulScanner()

    async def limited_receive() -> Message:
        # A chunked body has no Content-Length to check up front: count as it streams.
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > max_bytes:
                raise _BodyTooLarge(max_bytes)
            if nul_scanner.feed(chunk):
                raise _NulInBody
        return message

    return None, limited_receive


def _routing_error(scope: Scope, found: RouteMatch) -> ApiError:
    if found.template is None:
        return NotFound(f"No such endpoint: {excerpt(scope['path'])}")
    return MethodNotAllowed(
        f"Method {excerpt(scope['method'])} is not allowed on {excerpt(scope['path'])}; "
        f"allowed: {found.allow_header}",
        headers={"Allow": found.allow_header},
    )


def _too_many(decision: Decision, anonymous: bool = False) -> RateLimited:
    message = limit_message(decision)
    if anonymous:
        message = message.replace(". Retry", " without a valid API key. Retry", 1)
    # The exhausted window that resets last is the one the client waits for.
    blocked = [w for w in decision.windows if w.used >= w.limit] or [decision.binding]
    window = max(blocked, key=lambda w: w.reset).name
    return _Refused(message, decision.retry_after, window, "anonymous" if anonymous else "key")


@dataclasses.dataclass(slots=True)
class _Checks:
    """One API request's way through routing, authentication, rate limits and plan scope.
    Every window consulted adds its rate-limit headers to the exchange, so every answer
    carries them."""

    exchange: _Exchange
    now: float

    async def gate(self, receive: Receive) -> tuple[ASGIApp | None, Receive]:
        """The checks before an API endpoint, in the contract's order: routing (404/405) →
        key and rate limit (401/429) → plan (403) → URL and body format (400/413/415).
        Returns the answer to send instead of the app's (None: run the app) and the
        `receive` the endpoint reads its body through."""
        exchange = self.exchange
        scope, state = exchange.scope, exchange.state
        found = state.route_table.match(scope["path"], scope["method"])
        exchange.route = found.template or "-"
        if found.template is None or not found.allowed:
            # Routing comes first: 404/405 whatever the key, counted in no window.
            await self.anonymous(count=False)
            return render_api_error(_routing_error(scope, found)), receive
        relative = found.template.removeprefix(API_PREFIX)
        if relative == "/health":
            # Load balancers poll it: never refused, never counted, answered here.
            await self.anonymous(count=False)
            return health_response(await state.health.checks()), receive
        if relative in PUBLIC or relative.startswith("/docs"):
            return self._refusal(await self.counted_anonymously(None)), receive
        error = await self.key_and_plan(relative)
        if error is None and url_has_nul(scope["path"], scope.get("query_string", b"")):
            error = ValidationFailed(f"URL: {NUL_MESSAGE}")
        query, problem = parse_query(scope.get("query_string", b""), found.query)
        if error is None and problem is not None:
            error = ValidationFailed(problem)
        if error is None:
            error, receive = _check_body(
                scope, exchange.headers, receive, state.settings.max_body_bytes
            )
        if error is None and found.endpoint is not None:
            scope[DIRECT] = (found.endpoint, found.params)
            scope[DIRECT_QUERY] = query
        return self._refusal(error), receive

    def _refusal(self, error: ApiError | None) -> ASGIApp | None:
        if error is None:
            return None
        metrics = self.exchange.state.metrics
        if isinstance(error, _Refused) and metrics is not None:
            metrics.refused(error.window, error.caller)
        return render_api_error(error)

    def _use(self, decision: Decision) -> Decision:
        self.exchange.extra.extend(rate_limit_headers(decision))
        return decision

    async def anonymous(self, *, count: bool) -> Decision:
        """The client IP's window: counted, or only read (for its headers)."""
        state = self.exchange.state
        windows = anonymous_windows(state.settings)
        consult = state.limiter.hit if count else state.limiter.peek
        return self._use(await consult(f"ip:{self.exchange.client_ip}", windows, self.now))

    async def counted_anonymously(self, error: ApiError | None) -> ApiError | None:
        """A request without a usable key counts in its IP's window: `error` (None: go on),
        or 429 once that window is full."""
        decision = await self.anonymous(count=True)
        return error if decision.allowed else _too_many(decision, anonymous=True)

    async def key_and_plan(self, relative: str) -> ApiError | None:
        """401, 429 or 403, or None with the caller's Principal on the request."""
        principal = await self._authenticate()
        if isinstance(principal, Unauthorized):
            return await self.counted_anonymously(principal)
        scope, state = self.exchange.scope, self.exchange.state
        method = scope["method"]
        if not PLAN_LIMITS[principal.plan].api:
            # No API on this plan: the key is treated like no key (anonymous window).
            return await self.counted_anonymously(
                Forbidden(forbidden_message(principal.plan, method, relative))
            )
        windows = key_windows(principal.plan, state.settings.rate_limit_scale)
        decision = self._use(await state.limiter.hit(f"key:{principal.key_id}", windows, self.now))
        if not decision.allowed:
            scope["state"]["principal"] = principal
            return _too_many(decision)
        minute, day = decision.window("minute"), decision.window("day")
        scope["state"]["principal"] = principal.with_usage(
            minute.used if minute else 0, day.used if day else 0
        )
        if not plan_allows(principal.plan, method, relative):
            return Forbidden(forbidden_message(principal.plan, method, relative))
        return None

    async def _authenticate(self) -> Principal | Unauthorized:
        # The version of the database the request is served at (`db.committed_version`),
        # taken first: what it reads, the caller's Principal among them, may be kept under it
        # and reused (`kit.versioned`), so a revoked key, a plan change, anything committed by
        # any process is seen by the next request. When the key is read, it is in the
        # request's one session, which the endpoint's SessionDep continues and the gateway
        # closes (`_finish`) when the response is done.
        exchange = self.exchange
        state = exchange.state
        scope_state = exchange.scope["state"]
        now = datetime.fromtimestamp(self.now, UTC)
        try:
            hashed = key_hash(
                exchange.headers.get("authorization"), state.settings.effective_secret_key
            )
        except Unauthorized as refused:
            return refused
        version = await committed_version(state.engine)
        scope_state[DATA_VERSION] = version
        kept: Principal | None = state.principals.get(hashed, version)
        if kept is not None and not needs_touch(kept, now):
            return kept
        session = state.sessionmaker()
        scope_state[REQUEST_SESSION] = session
        try:
            found = await authenticate(session, hashed, now)
        except Unauthorized as refused:
            return refused
        if found.wrote:
            # Its own commit: `last_used_at` stays whatever the endpoint does, and on
            # SQLite the write lock is not held through the endpoint. What the request
            # reads after it is newer than `version`: harmless (see kit.versioned).
            await session.commit()
        else:
            state.principals.put(hashed, version, found.principal)
        return found.principal
