"""The dashboard's cookies: the session cookie, and the pre-session cookie that binds the
CSRF tokens of the sign-up and log-in forms before there is a session (see csrf.py)."""

from __future__ import annotations

import ipaddress
import secrets

from fastapi import Request
from starlette.responses import Response

from solarapi.dashboard.csrf import csrf_token, presession_binding, session_binding
from solarapi.dashboard.sessions import WebUser
from solarapi.state import settings_of

SESSION_COOKIE = "solar_session"
PRESESSION_COOKIE = "solar_presession"


def secret_key(request: Request) -> bytes:
    return settings_of(request).effective_secret_key


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


def keep_presession_cookie(request: Request, response: Response, user: WebUser | None) -> None:
    """Set the pre-session cookie on a page shown before log-in, unless the browser has it."""
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


def form_token(request: Request, user: WebUser | None) -> str:
    """The CSRF token the page's forms carry."""
    if user is not None:
        binding = session_binding(user.session_id)
    else:
        binding = presession_binding(_presession(request))
    return csrf_token(secret_key(request), binding)


def submitted_binding(request: Request, user: WebUser | None) -> str:
    """What a POSTed form's token must be bound to: the session, else the pre-session cookie
    the browser sent (none: no token is valid)."""
    if user is not None:
        return session_binding(user.session_id)
    cookie = request.cookies.get(PRESESSION_COOKIE, "")
    return presession_binding(cookie) if cookie else ""
