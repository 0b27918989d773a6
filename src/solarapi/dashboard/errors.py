"""The dashboard's errors and how they are shown: the exceptions its pages raise, the HTML
error page, and the route class that turns every error of a dashboard route into a page (the
API under /api keeps its JSON errors)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import HTMLResponse, Response

from solarapi.dashboard.cookies import SESSION_COOKIE, secret_key
from solarapi.dashboard.rendering import render
from solarapi.dashboard.responses import redirect, with_security_headers
from solarapi.dashboard.sessions import WebUser, resolve_session
from solarapi.db import is_outage
from solarapi.errors import ApiError
from solarapi.kit.text import NUL_MESSAGE, url_has_nul
from solarapi.kit.timefmt import utcnow
from solarapi.state import engine_of, sessionmaker_of

log = logging.getLogger("solarapi.dashboard")


class LoginRequired(Exception):
    """No valid session: redirect to the log-in page."""


class CsrfRejected(Exception):
    """A POST without a valid CSRF token, or from another origin."""


class PageError(Exception):
    """An error shown as a full page with the given status."""

    def __init__(self, status_code: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.title = title
        self.message = message


class FormRejected(Exception):
    """A form that cannot be accepted (in the API's words where the API has a rule); the
    page shows the message beside the form, with the status."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


# A message that starts with the name of the field it is about (`capacity_kwp: …`,
# `location.timezone: …`, `readings[3].energy_wh: …`): the name stays as the API writes it.
_FIELD_FIRST = re.compile(r"[a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_][a-z0-9_]*(?:\[\d+\])?)*:")


def sentence(message: str) -> str:
    """An API message (lower case, no full stop) as a sentence beside a form: the same words
    (contract section 14), capitalised unless they start with a field's name, with a full
    stop."""
    if not _FIELD_FIRST.match(message):
        message = message[:1].upper() + message[1:]
    return message if message.endswith(".") else message + "."


_ERROR_TITLES = {
    400: "That request did not work",
    403: "Not allowed",
    404: "Page not found",
    405: "Not allowed here",
    413: "Too much data",
    415: "Unsupported form",
    429: "Too many attempts",
    500: "Something went wrong",
    503: "Temporarily unavailable",
}


def error_page(
    request: Request,
    status_code: int,
    message: str,
    *,
    title: str | None = None,
    user: WebUser | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    if user is None:
        known = request.scope.get("state", {}).get("web_user")
        user = known if isinstance(known, WebUser) else None
    response = render(
        request,
        "error.html",
        {
            "status_code": status_code,
            "title": title or _ERROR_TITLES.get(status_code, "Error"),
            "message": message,
        },
        status_code=status_code,
        user=user,
    )
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


async def http_error_page(request: Request, exc: StarletteHTTPException) -> Response:
    """Routing errors (404/405) on non-API paths, called by the app's error handler."""
    if "web_user" not in request.scope.get("state", {}):
        await _remember_user(request)
    if exc.status_code == 404:
        message = "There is no page at this address. It may have moved, or the link is mistyped."
    elif exc.status_code == 405:
        message = f"This page does not accept {request.method} requests."
    else:
        message = str(exc.detail)
    headers = {"Allow": exc.headers["Allow"]} if exc.headers and "Allow" in exc.headers else None
    return error_page(request, exc.status_code, message, headers=headers)


async def _remember_user(request: Request) -> None:
    # An unknown address never ran a dashboard dependency: look the visitor up here so a
    # logged-in person keeps their navigation on the 404 page. Best effort only.
    user: WebUser | None = None
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        try:
            async with sessionmaker_of(request)() as session, session.begin():
                user = await resolve_session(
                    session, token=token, secret=secret_key(request), now=utcnow()
                )
        except Exception:  # the error page must render even with the database down
            log.warning("could not look up the session for an error page", exc_info=True)
    request.scope.setdefault("state", {})["web_user"] = user


class DashboardRoute(APIRoute):
    """Every dashboard response gets the security headers, and every error a page. A page
    (GET) answers HEAD too, as RFC 9110 asks of every GET resource (uptime monitors and link
    checkers ask HEAD): the same handler and headers; the server sends no body."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.methods is not None and "GET" in self.methods:
            self.methods.add("HEAD")

    # The handler's type is the one APIRoute declares (a coroutine's send and yield types).
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dashboard_handler(request: Request) -> Response:
            if url_has_nul(request.scope["path"], request.scope.get("query_string", b"")):
                return error_page(request, 400, f"The address is not valid: {NUL_MESSAGE}.")
            try:
                response = await handler(request)
            except LoginRequired:
                target = request.url.path
                if request.url.query:
                    target += "?" + request.url.query
                if request.method != "GET":
                    return redirect("/login")
                return redirect(f"/login?next={quote(target, safe='/')}")
            except CsrfRejected:
                return error_page(
                    request,
                    403,
                    "This form has expired or was not sent from this site. Go back, reload the "
                    "page and try again.",
                    title="Form expired",
                )
            except PageError as exc:
                return error_page(request, exc.status_code, exc.message, title=exc.title)
            except ApiError as exc:
                return error_page(request, exc.status_code, exc.message, headers=exc.headers)
            except RequestValidationError:
                return error_page(request, 400, "Some of the request's parameters are invalid.")
            except StarletteHTTPException as exc:
                return await http_error_page(request, exc)
            except Exception as exc:
                request_id = request.scope.get("state", {}).get("request_id", "")
                if await is_outage(exc, engine_of(request)):
                    log.error("database unavailable: %s", exc, extra={"request_id": request_id})
                    return error_page(
                        request,
                        503,
                        "The database is not answering right now. Try again in a minute.",
                        headers={"Retry-After": "5"},
                    )
                log.exception("dashboard error", extra={"request_id": request_id})
                return error_page(
                    request,
                    500,
                    f"An unexpected error stopped this page. If it keeps happening, quote "
                    f"request id {request_id}.",
                )
            return with_security_headers(response)

        return dashboard_handler
