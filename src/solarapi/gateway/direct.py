"""The `@direct` fast path's dispatch: the gateway has routed, authenticated, limited and
checked the request and left the chosen endpoint in the scope; `DirectDispatch` calls it in
place of FastAPI's stack (see the package's docstring)."""

from __future__ import annotations

from starlette.requests import Request, empty_send
from starlette.types import ASGIApp, Receive, Scope, Send

from solarapi.errors import ApiError, render_api_error

_new = object.__new__

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
        # `Request(scope, receive)` without its two `__init__`s (Request's and
        # HTTPConnection's): the attributes they set, set at once (pinned against
        # Starlette's own in tests/gateway/test_fast_paths.py).
        request = _new(Request)
        request.__dict__ = {
            "scope": scope,
            "_receive": receive,
            "_send": empty_send,
            "_stream_consumed": False,
            "_is_disconnected": False,
            "_form": None,
        }
        try:
            response = await endpoint(request=request, **params)
        except ApiError as exc:
            response = render_api_error(exc)
        await response(scope, receive, send)
