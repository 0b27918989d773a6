"""`ApiGateway`: the outermost ASGI layer of every request."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from solarapi.gateway.checks import Checks
from solarapi.gateway.exchange import Exchange
from solarapi.gateway.failure import answer_failure
from solarapi.gateway.finish import finish


class ApiGateway:
    """The outermost layer of every request (see `create_app`): it answers routing, key,
    limit, plan and body errors and /health itself, and runs the app for the rest."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange.begin(scope, send)
        try:
            await self._answer(exchange, receive)
        except Exception as exc:
            await answer_failure(exchange, exc, receive)
        finally:
            await finish(exchange)

    async def _answer(self, exchange: Exchange, receive: Receive) -> None:
        scope = exchange.scope
        path = scope["path"]
        if not (path.startswith("/api/") or path == "/api"):
            # Dashboard pages: not limited here, but they carry the anonymous window's
            # headers like every other response. `/api` itself is the API's (a JSON 404),
            # not a dashboard page.
            await exchange.peek_anonymous()
            await self.app(scope, receive, exchange.send)
            return
        checks = Checks(exchange, exchange.state.clock())
        answer, receive = await checks.gate(receive)
        if answer is not None:
            await answer(scope, receive, exchange.send)
            return
        if scope["method"] == "HEAD":
            # The app runs GET (FastAPI's routes do not answer HEAD) in a scope of its own:
            # the server's stays HEAD, so it sends the headers and expects no body.
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, exchange.send)
