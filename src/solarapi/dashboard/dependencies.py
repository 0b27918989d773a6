"""FastAPI dependencies of the dashboard's routes: the signed-in person, the log-in
throttle, and the client's address as the API sees it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from solarapi.dashboard.cookies import SESSION_COOKIE, secret_key
from solarapi.dashboard.errors import LoginRequired
from solarapi.dashboard.sessions import WebUser, resolve_session
from solarapi.dashboard.throttle import LoginThrottle
from solarapi.db import SessionDep
from solarapi.kit import clientip
from solarapi.kit.timefmt import utcnow
from solarapi.state import ClockDep, LimiterDep, SettingsDep, settings_of


async def optional_user(request: Request, session: SessionDep) -> WebUser | None:
    user = await resolve_session(
        session,
        token=request.cookies.get(SESSION_COOKIE),
        secret=secret_key(request),
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


def _throttle(settings: SettingsDep, limiter: LimiterDep, clock: ClockDep) -> LoginThrottle:
    return LoginThrottle(limiter, settings.effective_secret_key, clock)


ThrottleDep = Annotated[LoginThrottle, Depends(_throttle)]


def client_ip(request: Request) -> str:
    return clientip.client_ip(request.scope, settings_of(request).trusted_networks)
