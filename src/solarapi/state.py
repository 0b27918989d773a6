"""Typed access to the settings, rate limiter, clock, engine and sessionmaker that
`create_app` keeps on `app.state`, for the code that runs inside FastAPI: routers take the
`…Dep` aliases; code that already holds the request uses the `…_of` functions. The ASGI
layers around FastAPI (the gateway, idempotency), the session dependency (`db.session`, below
every area) and the lifespan read `app.state` themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from solarapi.config import Settings
from solarapi.ratelimit.base import RateLimiter

# Epoch seconds: what the rate limiter and the login throttle count windows in.
Clock = Callable[[], float]


def settings_of(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


def limiter_of(request: Request) -> RateLimiter:
    return cast(RateLimiter, request.app.state.limiter)


def clock_of(request: Request) -> Clock:
    return cast(Clock, request.app.state.clock)


def engine_of(request: Request) -> AsyncEngine:
    return cast(AsyncEngine, request.app.state.engine)


def sessionmaker_of(request: Request) -> async_sessionmaker[AsyncSession]:
    return cast(async_sessionmaker[AsyncSession], request.app.state.sessionmaker)


SettingsDep = Annotated[Settings, Depends(settings_of)]
LimiterDep = Annotated[RateLimiter, Depends(limiter_of)]
ClockDep = Annotated[Clock, Depends(clock_of)]
