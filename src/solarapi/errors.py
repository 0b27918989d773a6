"""One error type, rendered by one set of handlers as `{"error", "code"}`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal, get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.text import excerpt

log = logging.getLogger("solarapi.errors")

# Every `code` an error body may carry (the OpenAPI document's `Error` lists them).
ErrorCode = Literal[
    "unauthorized",
    "forbidden",
    "rate_limit",
    "not_found",
    "validation",
    "server_error",
    "method_not_allowed",
    "conflict",
    "payload_too_large",
    "unsupported_media_type",
    "unavailable",
    "request_timeout",
]
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)


class ApiError(StarletteHTTPException):
    """Every error of the API: its status, its stable code and a message, rendered by one
    handler as `{error, code}`.

    A Starlette HTTPException only so that one raised while FastAPI reads a request's body
    (the gateway's body checks: too large, a NUL character) reaches the handlers as itself:
    FastAPI re-raises an HTTPException from body reading and turns anything else into a 400
    of its own. Nothing else relies on it; the handler for `ApiError` is chosen first."""

    status_code = 500
    code: ClassVar[ErrorCode] = "server_error"
    headers: dict[str, str]

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(type(self).status_code, message)
        self.args = (message,)
        self.message = message
        self.headers = headers or {}

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class Unauthorized(ApiError):
    status_code = 401
    code = "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ApiError):
    status_code = 403
    code = "forbidden"


class NotFound(ApiError):
    status_code = 404
    code = "not_found"


class ValidationFailed(ApiError):
    status_code = 400
    code = "validation"


class Conflict(ApiError):
    status_code = 409
    code = "conflict"


class RateLimited(ApiError):
    status_code = 429
    code = "rate_limit"


class PayloadTooLarge(ApiError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(ApiError):
    status_code = 415
    code = "unsupported_media_type"


class Unavailable(ApiError):
    status_code = 503
    code = "unavailable"

    def __init__(self, message: str = "The database is unavailable; try again shortly.") -> None:
        super().__init__(message, headers={"Retry-After": "5"})


class MethodNotAllowed(ApiError):
    status_code = 405
    code = "method_not_allowed"


def error_response(
    status_code: int, code: ErrorCode, message: str, headers: dict[str, str] | None = None
) -> OrjsonResponse:
    return OrjsonResponse(
        {"error": message, "code": code}, status_code=status_code, headers=headers
    )


def render_api_error(exc: ApiError) -> OrjsonResponse:
    return error_response(exc.status_code, exc.code, exc.message, exc.headers)


_CODES: dict[int, ErrorCode] = {
    400: "validation",
    401: "unauthorized",
    403: "forbidden",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limit",
}


def http_exception_response(exc: StarletteHTTPException) -> OrjsonResponse:
    """A Starlette or FastAPI HTTPException that is no `ApiError` (as FastAPI's "There was an
    error parsing the body") in the `{error, code}` shape."""
    code = _CODES.get(exc.status_code, "server_error" if exc.status_code >= 500 else "validation")
    return error_response(
        exc.status_code, code, _body_parse_message(exc) or str(exc.detail), dict(exc.headers or {})
    )


def _body_parse_message(exc: StarletteHTTPException) -> str | None:
    """What FastAPI's "There was an error parsing the body" was: it raises it `from` what its
    JSON decoding raised other than a syntax error (bytes that are not UTF-8, nesting deeper
    than the decoder recurses, a number too long to convert)."""
    if exc.status_code != 400 or exc.detail != "There was an error parsing the body":
        return None
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return "request body is not valid UTF-8"
    if isinstance(exc.__cause__, RecursionError):
        return "request body is not valid JSON: nested too deeply"
    return "request body is not valid JSON"


def describe_validation_errors(errors: Any) -> str:
    """Turn pydantic/FastAPI error lists into one readable, located message."""
    parts: list[str] = []
    for err in list(errors)[:5]:
        loc = [
            excerpt(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "header")
        ]
        where = ""
        for piece in loc:
            where += f"[{piece}]" if piece.isdigit() else (f".{piece}" if where else piece)
        msg = str(err.get("msg", "invalid value"))
        if not where and tuple(err.get("loc", ()))[:1] == ("body",):
            # The body as a whole: absent, or not an object.
            if err.get("type") == "missing":
                return "request body is required: send a JSON object"
            if err.get("type") in ("model_attributes_type", "dict_type", "model_type"):
                return "request body must be a JSON object"
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        elif err.get("type") == "missing":
            msg = "is required"
        elif err.get("type") in ("too_long", "too_short") and isinstance(err.get("input"), str):
            # A length constraint applied after a validator (a time zone's name): pydantic's
            # generic wording counts "items"; say characters, as for any other string.
            ctx = err.get("ctx") or {}
            bound = "at most" if err["type"] == "too_long" else "at least"
            limit = ctx.get("max_length" if err["type"] == "too_long" else "min_length")
            msg = f"String should have {bound} {limit} characters"
        elif err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            return f"request body is not valid JSON: {ctx.get('error', 'syntax error')}"
        msg = msg.removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts) or "invalid request"


# Renders an HTTP error on a path outside the API (the dashboard's HTML error page).
PageRenderer = Callable[[Request, StarletteHTTPException], Awaitable[Response]]


def install_error_handlers(app: FastAPI, *, outside_api: PageRenderer) -> None:
    """`outside_api` renders routing errors on non-API paths: the dashboard passes its HTML
    page (app.py wires it), so this bottom-layer module imports no area."""

    async def api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return render_api_error(exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if not request.url.path.startswith("/api/"):
            # Outside the API (the dashboard) errors are HTML pages in the dashboard's look.
            return await outside_api(request, exc)
        if exc.status_code == 404:
            return error_response(
                404, "not_found", f"No such endpoint: {excerpt(request.url.path)}"
            )
        if exc.status_code == 405:
            headers = dict(exc.headers or {})
            allow = headers.get("Allow", "")
            return error_response(
                405,
                "method_not_allowed",
                f"Method {excerpt(request.method)} is not allowed on {excerpt(request.url.path)}; "
                f"allowed: {allow}",
                {"Allow": allow},
            )
        return http_exception_response(exc)

    async def validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "validation", describe_validation_errors(exc.errors()))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
