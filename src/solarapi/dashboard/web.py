"""HTTP plumbing of the dashboard: templates, security headers, cookies, forms, CSRF, the
logged-in user, and HTML error pages (the API under /api keeps its JSON errors).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import secrets
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlsplit

import jinja2
from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import HTMLResponse, RedirectResponse, Response

from solarapi.dashboard.chart import format_energy
from solarapi.dashboard.csrf import csrf_token, csrf_valid
from solarapi.dashboard.sessions import WebUser, resolve_session
from solarapi.db import SessionDep, is_outage
from solarapi.errors import ApiError
from solarapi.kit import clientip
from solarapi.kit.text import NUL_MESSAGE, url_has_nul
from solarapi.kit.timefmt import as_utc, parse_timestamp, utcnow
from solarapi.state import engine_of, sessionmaker_of, settings_of

log = logging.getLogger("solarapi.dashboard")

SESSION_COOKIE = "solar_session"
# Bound to the sign-up and log-in forms before there is a session (see csrf.py).
PRESESSION_COOKIE = "solar_presession"
MAX_FORM_BYTES = 64 * 1024

_HERE = Path(__file__).parent
STATIC_DIR = _HERE / "static"

# No inline script or style anywhere: every script and stylesheet is a file of this server.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


def _asset_versions() -> dict[str, str]:
    # Content hashes in asset URLs let browsers cache the files forever and still see changes.
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for path in STATIC_DIR.iterdir()
        if path.is_file()
    }


ASSET_VERSIONS = _asset_versions()


def asset_url(name: str) -> str:
    return f"/static/{name}?v={ASSET_VERSIONS[name]}"


templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_HERE / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.globals["asset_url"] = asset_url


def _when(value: datetime | str | None, empty: str = "never") -> str:
    if value is None:
        return empty
    if isinstance(value, str):  # an API timestamp ("…Z"), as the services return them
        value = parse_timestamp(value)
    return as_utc(value).strftime("%Y-%m-%d %H:%M UTC")


def _number(value: float | int | None, decimals: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{decimals}f}"


templates.globals["format_energy"] = format_energy
templates.filters["when"] = _when
templates.filters["number"] = _number


# --- exceptions the dashboard route class turns into pages ------------------------------


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


# --- rendering --------------------------------------------------------------------------


def with_security_headers(response: Response, *, private: bool = True) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if private:
        # Pages show account data (and once, a key): never store them in any cache.
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def render(
    request: Request,
    template: str,
    context: Mapping[str, object] | None = None,
    *,
    status_code: int = 200,
    user: WebUser | None = None,
) -> HTMLResponse:
    full: dict[str, object] = {
        "user": user,
        "path": request.url.path,
        "csrf": form_token(request, user),
        "request_id": request.scope.get("state", {}).get("request_id", ""),
        "base_url": str(request.base_url).rstrip("/"),
    }
    full.update(context or {})
    html = templates.get_template(template).render(full)
    response = HTMLResponse(html, status_code=status_code)
    _keep_presession_cookie(request, response, user)
    with_security_headers(response)
    return response


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
                    session, token=token, secret=_secret(request), now=utcnow()
                )
        except Exception:  # the error page must render even with the database down
            log.warning("could not look up the session for an error page", exc_info=True)
    request.scope.setdefault("state", {})["web_user"] = user


def redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    with_security_headers(response)
    return response


# --- the route class: every dashboard response gets headers and HTML errors ---------------


class DashboardRoute(APIRoute):
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


def safe_next(target: str | None) -> str:
    """A same-site path to go to after log-in; anything else (open redirects) → overview."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/overview"
    if target.startswith("/api/") or "\\" in target or any(ord(c) < 32 for c in target):
        return "/overview"
    return target


# --- cookies, client address --------------------------------------------------------------


def is_https(request: Request) -> bool:
    if request.url.scheme == "https":
        return True
    # Behind a TLS-terminating proxy the scheme is only believed from a trusted proxy.
    settings = settings_of(request)
    client = request.client.host if request.client else ""
    if not settings.trusted_networks or not client:
        return False
    try:
        peer = ipaddress.ip_address(client)
    except ValueError:
        return False
    trusted = any(peer in net for net in settings.trusted_networks)
    return trusted and request.headers.get("x-forwarded-proto", "").lower() == "https"


def client_ip(request: Request) -> str:
    return clientip.client_ip(request.scope, settings_of(request).trusted_networks)


def set_session_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=is_https(request),
        path="/",
    )
    response.delete_cookie(PRESESSION_COOKIE, path="/")


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=is_https(request)
    )


def _presession(request: Request) -> str:
    """The visitor's pre-session value, created once per request when missing."""
    state = request.scope.setdefault("state", {})
    value = state.get("presession") or request.cookies.get(PRESESSION_COOKIE, "")
    if not (16 <= len(value) <= 64 and value.isascii()):
        value = secrets.token_urlsafe(24)
    state["presession"] = value
    return str(value)


def _keep_presession_cookie(request: Request, response: Response, user: WebUser | None) -> None:
    if user is not None:
        return
    value = _presession(request)
    if request.cookies.get(PRESESSION_COOKIE) != value:
        response.set_cookie(
            PRESESSION_COOKIE,
            value,
            httponly=True,
            samesite="lax",
            secure=is_https(request),
            path="/",
        )


def _secret(request: Request) -> bytes:
    return settings_of(request).effective_secret_key


def form_token(request: Request, user: WebUser | None) -> str:
    binding = f"session:{user.session_id}" if user else f"pre:{_presession(request)}"
    return csrf_token(_secret(request), binding)


# --- forms --------------------------------------------------------------------------------


async def read_form(request: Request, user: WebUser | None) -> dict[str, str]:
    """The POSTed form, after the CSRF and origin checks. Every dashboard POST goes here."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise PageError(415, "Unsupported form", "Forms must be sent as ordinary HTML forms.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "Too much data", "This form sent more data than forms here use.")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise PageError(400, "That request did not work", "The form was not UTF-8.") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            raise PageError(400, "That request did not work", f"Form fields: {NUL_MESSAGE}.")
        form.setdefault(name, value)
    _check_origin(request)
    if user is not None:
        binding = f"session:{user.session_id}"
    else:
        cookie = request.cookies.get(PRESESSION_COOKIE, "")
        binding = f"pre:{cookie}" if cookie else ""
    if not csrf_valid(_secret(request), binding, form.get("csrf")):
        raise CsrfRejected
    return form


MAX_UPLOAD_BYTES = 10 * 1024 * 1024


async def read_upload(request: Request, user: WebUser, field: str) -> tuple[dict[str, str], bytes]:
    """A POSTed file form (multipart, one file in `field`, at most 10 MiB) after the same
    CSRF and origin checks as `read_form`: its text fields and the file's bytes."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "multipart/form-data":
        raise PageError(415, "Unsupported form", "Files must be sent from the page's form.")
    length = request.headers.get("content-length", "")
    if not length.isdigit():
        raise PageError(411, "That request did not work", "The upload must state its length.")
    if int(length) > MAX_UPLOAD_BYTES:
        raise PageError(
            413,
            "Too much data",
            f"The file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB; split it into several "
            "files or use `solarapi readings import`.",
        )
    _check_origin(request)
    async with request.form(max_files=1, max_fields=8) as posted:
        fields: dict[str, str] = {}
        data = b""
        for name, value in posted.multi_items():
            if isinstance(value, str):
                if "\x00" in name or "\x00" in value:
                    raise PageError(
                        400, "That request did not work", f"Form fields: {NUL_MESSAGE}."
                    )
                fields.setdefault(name, value)
            elif name == field:
                data = await value.read()
    if not csrf_valid(_secret(request), f"session:{user.session_id}", fields.get("csrf")):
        raise CsrfRejected
    return fields, data


def _check_origin(request: Request) -> None:
    # Defence in depth beside the token: browsers send Origin on cross-site POSTs.
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        if origin == "null":
            raise CsrfRejected
        return
    host = request.headers.get("host", "")
    if urlsplit(origin).netloc.lower() != host.lower():
        raise CsrfRejected


# --- the logged-in user ---------------------------------------------------------------------


async def optional_user(request: Request, session: SessionDep) -> WebUser | None:
    user = await resolve_session(
        session,
        token=request.cookies.get(SESSION_COOKIE),
        secret=_secret(request),
        now=utcnow(),
    )
    # Kept for error pages, so a logged-in person keeps their navigation on a 404.
    request.scope.setdefault("state", {})["web_user"] = user
    return user


async def required_user(user: Annotated[WebUser | None, Depends(optional_user)]) -> WebUser:
    if user is None:
        raise LoginRequired
    return user


OptionalUserDep = Annotated[WebUser | None, Depends(optional_user)]
UserDep = Annotated[WebUser, Depends(required_user)]
