"""The checks before an API endpoint, in the contract's order: routing (404/405) → key and
rate limit (401/429) → plan (403) → URL and body format (400/413/415)."""

from __future__ import annotations

import dataclasses

from starlette.types import ASGIApp, Receive, Scope

from solarapi.auth.principal import USAGE
from solarapi.auth.scopes import API_PREFIX, PUBLIC
from solarapi.errors import (
    ApiError,
    MethodNotAllowed,
    NotFound,
    Unauthorized,
    ValidationFailed,
    render_api_error,
)
from solarapi.gateway import ingest, plan, ratelimits
from solarapi.gateway.authentication import authenticate_request
from solarapi.gateway.body import BODY_METHODS, check_body
from solarapi.gateway.direct import DIRECT
from solarapi.gateway.exchange import Exchange
from solarapi.gateway.health import HEALTH, LIVE, health_answer, live_answer
from solarapi.gateway.query import parse_query
from solarapi.gateway.routing import RouteMatch
from solarapi.idempotency.middleware import HEADER as IDEMPOTENCY_HEADER
from solarapi.kit.direct_endpoints import DIRECT_QUERY
from solarapi.kit.text import NUL_MESSAGE, excerpt, url_has_nul


def _routing_error(scope: Scope, found: RouteMatch) -> ApiError:
    if found.template is None:
        return NotFound(f"No such endpoint: {excerpt(scope['path'])}")
    return MethodNotAllowed(
        f"Method {excerpt(scope['method'])} is not allowed on {excerpt(scope['path'])}; "
        f"allowed: {found.allow_header}",
        headers={"Allow": found.allow_header},
    )


@dataclasses.dataclass(slots=True)
class Checks:
    """One API request's way through routing, authentication, rate limits and plan scope.
    Every window consulted adds its rate-limit headers to the exchange, so every answer
    carries them."""

    exchange: Exchange
    now: float

    async def gate(self, receive: Receive) -> tuple[ASGIApp | None, Receive]:
        """The answer to send instead of the app's (None: run the app) and the `receive`
        the endpoint reads its body through."""
        exchange = self.exchange
        scope, state = exchange.scope, exchange.state
        found = state.route_table.match(scope["path"], scope["method"])
        exchange.route = found.template or "-"
        if found.template is None or not found.allowed:
            # Routing comes first: 404/405 whatever the key, counted in no window.
            await ratelimits.anonymous(exchange, self.now, count=False)
            return render_api_error(_routing_error(scope, found)), receive
        relative = found.template.removeprefix(API_PREFIX)
        if relative == LIVE:
            return live_answer(), receive
        if relative == HEALTH:
            await ratelimits.anonymous(exchange, self.now, count=False)
            return await health_answer(exchange), receive
        if relative in PUBLIC or relative.startswith("/docs"):
            return self._refusal(await self._counted_anonymously(None)), receive
        if len(exchange.authorization) > 1:
            # Two keys: neither is used (either could act for the wrong account); the
            # request counts in its address's anonymous window.
            error = await self._counted_anonymously(
                ValidationFailed("the request has more than one Authorization header; send one")
            )
        elif relative == ingest.INGEST_ROUTE:
            error = await self._ingest_token()
        else:
            error = await self._key_and_plan(relative)
        if error is None and url_has_nul(scope["path"], scope.get("query_string", b"")):
            error = ValidationFailed(f"URL: {NUL_MESSAGE}")
        query, problem = parse_query(scope.get("query_string", b""), found.query)
        if error is None and problem is not None:
            error = ValidationFailed(problem)
        if error is None and scope["method"] in BODY_METHODS:  # else `check_body` has none
            limit = state.settings.max_body_bytes
            if found.body_limit is not None:
                limit = min(limit, found.body_limit)
            error, receive = check_body(scope, exchange.headers, receive, limit)
        if (
            error is None
            and found.endpoint is not None
            # A POST with an Idempotency-Key takes FastAPI's stack, where the idempotency
            # middleware claims and stores the key (the direct call would bypass it).
            and not (scope["method"] == "POST" and IDEMPOTENCY_HEADER in exchange.headers)
        ):
            scope[DIRECT] = (found.endpoint, found.params)
            scope[DIRECT_QUERY] = query
        return self._refusal(error), receive

    def _refusal(self, error: ApiError | None) -> ASGIApp | None:
        if error is None:
            return None
        metrics = self.exchange.state.metrics
        if isinstance(error, ratelimits.Refused) and metrics is not None:
            metrics.refused(error.window, error.caller)
        return render_api_error(error)

    async def _counted_anonymously(self, error: ApiError | None) -> ApiError | None:
        """A request without a usable key counts in its IP's window: `error` (None: go on),
        or 429 once that window is full."""
        decision = await ratelimits.anonymous(self.exchange, self.now, count=True)
        return error if decision.allowed else ratelimits.too_many(decision, anonymous=True)

    async def _ingest_token(self) -> ApiError | None:
        """401 or 429 from the ingest token's own window, or None with the logger on the
        request (`gateway.ingest`)."""
        refused = await ingest.token_caller(self.exchange, self.now)
        if isinstance(refused, Unauthorized):
            return await self._counted_anonymously(refused)
        return refused

    async def _key_and_plan(self, relative: str) -> ApiError | None:
        """401, 429 or 403, or None with the caller's Principal on the request."""
        misplaced = ingest.misplaced_token(self.exchange)
        if misplaced is not None:
            return await self._counted_anonymously(misplaced)
        principal = await authenticate_request(self.exchange, self.now)
        if isinstance(principal, Unauthorized):
            return await self._counted_anonymously(principal)
        scope = self.exchange.scope
        method = scope["method"]
        if not plan.has_api(principal):
            # No API on this plan: the key is treated like no key (anonymous window).
            refused = plan.refusal(principal, method, relative)
            return await self._counted_anonymously(refused)
        decision = await ratelimits.for_key(self.exchange, principal, self.now)
        if not decision.allowed:
            scope["state"]["principal"] = principal
            return ratelimits.too_many(decision)
        # A key's windows are `key_windows`: the minute's, then the day's.
        minute, day = decision.windows
        scope_state = scope["state"]
        scope_state["principal"] = principal
        scope_state[USAGE] = (minute.used, day.used)
        return plan.refusal(principal, method, relative)
