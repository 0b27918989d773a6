"""The API gateway middleware: request ids, version header, authentication, rate limits,
plan scope, body limits and the error shape for anything that escapes the app.

A pure ASGI middleware (no BaseHTTPMiddleware) so it costs microseconds. It runs the
contract's order of checks: routing (404/405) → 429 → 403 → body format → the endpoint
(400 validation → 404 → 409).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.routing import Match, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from solarapi.auth.principal import Principal
from solarapi.auth.scopes import API_PREFIX, PUBLIC, forbidden_message, plan_allows
from solarapi.auth.service import authenticate
from solarapi.errors import (
    ApiError,
    Forbidden,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    error_response,
    is_database_unavailable,
    render_api_error,
)
from solarapi.kit.ids import new_id
from solarapi.kit.plans import PLAN_LIMITS
from solarapi.kit.timefmt import utcnow
from solarapi.ratelimit.base import Decision
from solarapi.ratelimit.policy import (
    anonymous_windows,
    key_windows,
    limit_message,
    rate_limit_headers,
)

log = logging.getLogger("solarapi.request")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_BODY_METHODS = {"POST", "PUT", "PATCH"}


class _BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body exceeds the limit of {limit} bytes")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class RouteTable:
    """Path templates and methods of every route, so the gateway can tell 404/405 from a
    real endpoint (and name its template for the plan scope table) before the app runs."""

    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern[str], str, frozenset[str]]] = []

    def add(self, template: str, methods: set[str]) -> None:
        regex, _, _ = compile_path(template)
        if "GET" in methods:
            methods = methods | {"HEAD"}
        self._routes.append((regex, template, frozenset(methods)))

    def add_router(self, router: APIRouter, prefix: str) -> None:
        for route in router.routes:
            if isinstance(route, APIRoute):
                self.add(prefix + route.path, set(route.methods or ()))

    def match(self, path: str, method: str) -> tuple[Match, str]:
        partial = ""
        for regex, template, methods in self._routes:
            if regex.match(path):
                if method in methods:
                    return Match.FULL, template
                partial = partial or template
        return (Match.PARTIAL, partial) if partial else (Match.NONE, "")


class ApiGateway:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        app = scope["app"]
        state = app.state
        incoming_id = _header(scope, b"x-request-id")
        request_id = (
            incoming_id if incoming_id and _REQUEST_ID.match(incoming_id) else new_id("req")
        )
        scope.setdefault("state", {})["request_id"] = request_id
        extra: list[tuple[bytes, bytes]] = [
            (b"x-request-id", request_id.encode()),
            (b"api-version", b"1.0"),
        ]
        status = 500
        response_started = False
        route = "-"

        async def send_with_headers(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            if scope["path"].startswith("/api/"):
                early, route, receive = await self._gate(scope, receive, state, app, extra)
            else:
                early = None
            if early is not None:
                await render_api_error(early)(scope, receive, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            if response_started:
                log.exception("error after the response started", extra={"request_id": request_id})
                return
            if is_database_unavailable(exc):
                log.error("database unavailable: %s", exc, extra={"request_id": request_id})
                await render_api_error(Unavailable())(scope, receive, send_with_headers)
            else:
                log.exception("unhandled error", extra={"request_id": request_id})
                await error_response(
                    500,
                    "server_error",
                    f"Internal server error; quote request id {request_id} when reporting it",
                )(scope, receive, send_with_headers)
        finally:
            principal = scope["state"].get("principal")
            log.info(
                "request",
                extra={
                    "request_id": request_id,
                    "method": scope["method"],
                    "route": route,
                    "path": scope["path"],
                    "status": status,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                    "key_id": principal.key_id if isinstance(principal, Principal) else None,
                    "client_ip": self._client_ip(scope, state.settings.trusted_networks),
                },
            )

    @staticmethod
    def _client_ip(
        scope: Scope, trusted: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    ) -> str:
        client = scope.get("client")
        peer = client[0] if client else "unknown"
        if not trusted:
            return str(peer)
        chain = [peer]
        forwarded = _header(scope, b"x-forwarded-for")
        if forwarded:
            chain = [part.strip() for part in forwarded.split(",") if part.strip()] + [peer]
        # Walk from the nearest hop outwards, skipping our own trusted proxies.
        for hop in reversed(chain):
            try:
                address = ipaddress.ip_address(hop)
            except ValueError:
                return str(hop)
            if not any(address in net for net in trusted):
                return str(hop)
        return str(chain[0])

    async def _gate(
        self, scope: Scope, receive: Receive, state: Any, app: Any, extra: list[tuple[bytes, bytes]]
    ) -> tuple[ApiError | None, str, Receive]:
        settings = state.settings
        limiter = state.limiter
        now = state.clock()
        client_ip = self._client_ip(scope, settings.trusted_networks)
        anon_bucket = f"ip:{client_ip}"
        anon = anonymous_windows(settings)

        def use(decision: Decision) -> Decision:
            extra.extend(rate_limit_headers(decision))
            return decision

        match, template = state.route_table.match(scope["path"], scope["method"])
        relative = template[len(API_PREFIX) :] if template.startswith(API_PREFIX) else template
        if match is not Match.FULL or relative == "/health":
            # Routing errors answer 404/405 whatever the key; health is never refused.
            use(await limiter.peek(anon_bucket, anon, now))
            return None, template or "-", receive
        if relative in PUBLIC or relative.startswith("/docs"):
            decision = use(await limiter.hit(anon_bucket, anon, now))
            if not decision.allowed:
                return self._too_many(decision, anonymous=True), template, receive
            return None, template, receive

        try:
            async with state.sessionmaker() as session:
                principal = await authenticate(
                    session,
                    _header(scope, b"authorization"),
                    settings.effective_secret_key,
                    utcnow(),
                )
                await session.commit()
        except Unauthorized as exc:
            decision = use(await limiter.hit(anon_bucket, anon, now))
            error = exc if decision.allowed else self._too_many(decision, anonymous=True)
            return error, template, receive

        limits = PLAN_LIMITS[principal.plan]
        if not limits.api:
            decision = use(await limiter.hit(anon_bucket, anon, now))
            if not decision.allowed:
                return self._too_many(decision, anonymous=True), template, receive
            return Forbidden(forbidden_message(principal.plan, "GET", relative)), template, receive

        decision = use(
            await limiter.hit(f"key:{principal.key_id}", key_windows(principal.plan), now)
        )
        if not decision.allowed:
            return self._too_many(decision), template, receive
        minute, day = decision.window("minute"), decision.window("day")
        principal = dataclasses.replace(
            principal,
            usage_minute=minute.used if minute else 0,
            usage_today=day.used if day else 0,
        )
        scope["state"]["principal"] = principal
        if not plan_allows(principal.plan, scope["method"], relative):
            return (
                Forbidden(forbidden_message(principal.plan, scope["method"], relative)),
                template,
                receive,
            )

        body_error, receive = self._check_body(scope, receive, settings.max_body_bytes)
        return body_error, template, receive

    @staticmethod
    def _too_many(decision: Decision, anonymous: bool = False) -> RateLimited:
        message = limit_message(decision)
        if anonymous:
            message = message.replace(". Retry", " without a valid API key. Retry", 1)
        return RateLimited(message, headers={"Retry-After": str(decision.retry_after)})

    @staticmethod
    def _check_body(
        scope: Scope, receive: Receive, max_bytes: int
    ) -> tuple[ApiError | None, Receive]:
        if scope["method"] not in _BODY_METHODS:
            return None, receive
        length_header = _header(scope, b"content-length")
        chunked = (_header(scope, b"transfer-encoding") or "").lower() == "chunked"
        length = int(length_header) if length_header and length_header.isdigit() else 0
        if length > max_bytes:
            return PayloadTooLarge(f"Request body exceeds the limit of {max_bytes} bytes"), receive
        if length or chunked:
            content_type = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
            if content_type != "application/json" and not content_type.endswith("+json"):
                return (
                    UnsupportedMediaType(
                        f"Request bodies must be JSON (Content-Type: application/json); "
                        f"got '{content_type or 'none'}'"
                    ),
                    receive,
                )
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise _BodyTooLarge(max_bytes)
            return message

        return None, limited_receive


Clock = Callable[[], float]
