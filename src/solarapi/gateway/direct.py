"""The `@direct` fast path's dispatch: the gateway has routed, authenticated, limited and
checked the request and left the chosen endpoint in the scope; `DirectDispatch` calls it in
place of FastAPI's stack (see the package's docstring)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from solarapi.errors import ApiError, render_api_error

# Where the gateway leaves a `@direct` endpoint and its path parameters for `DirectDispatch`.
DIRECT = "solarapi.direct"


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
