"""Foundation fixtures: apps built with changed settings, a probe app with test-only routes,
and a capture of the JSON log lines the service writes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

from solarapi.app import create_app
from solarapi.auth.scopes import API_PREFIX
from solarapi.config import Settings
from solarapi.errors import ApiError, Conflict, Forbidden, NotFound, ValidationFailed
from solarapi.kit.pagination import PageDep, page_response
from solarapi.logs import JsonFormatter
from tests.support import TestClock

PROBE_BOOM = f"{API_PREFIX}/_probe/boom"
PROBE_ECHO = f"{API_PREFIX}/_probe/echo"
PROBE_RAISE = f"{API_PREFIX}/_probe/raise/{{code}}"
PROBE_ITEMS = f"{API_PREFIX}/_probe/items"
PROBE_BODY_LIMIT = 4096
PROBE_ITEM_COUNT = 137


def settings_like(settings: Settings, **changes: Any) -> Settings:
    """A fresh Settings with the same database and secret, and some values changed."""
    return Settings(**{**settings.model_dump(), **changes})


@asynccontextmanager
async def running_app(settings: Settings, clock: TestClock | None = None) -> AsyncIterator[FastAPI]:
    app = create_app(settings, clock=clock or TestClock(), run_jobs=False)
    async with app.router.lifespan_context(app):
        yield app


class EchoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    count: int = 0


def add_probe_routes(app: FastAPI) -> None:
    """Test-only routes (never in the product): an unhandled exception and a JSON body."""

    @app.get(PROBE_BOOM)
    async def boom() -> None:
        raise RuntimeError("secret internal detail: SELECT * FROM api_keys")

    @app.post(PROBE_ECHO)
    async def echo(body: EchoBody) -> dict[str, Any]:
        return body.model_dump()

    @app.get(PROBE_RAISE)
    async def raise_api_error(code: str) -> None:
        errors: dict[str, type[ApiError]] = {
            "validation": ValidationFailed,
            "not_found": NotFound,
            "conflict": Conflict,
            "forbidden": Forbidden,
        }
        raise errors[code](f"probe {code}")

    @app.get(PROBE_ITEMS)
    async def items(request: Request, page: PageDep) -> Response:
        every = [{"id": f"item_{n:03d}"} for n in range(PROBE_ITEM_COUNT)]
        return page_response(
            request, every[page.offset : page.offset + page.limit], len(every), page
        )


@pytest.fixture(scope="session")
async def probe_app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    """The product app plus the probe routes, on the same database as `app`."""
    async with running_app(settings_like(settings, max_body_bytes=PROBE_BODY_LIMIT), clock) as app:
        add_probe_routes(app)
        yield app


class LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def log_lines() -> Iterator[LogCapture]:
    """Every log line the service writes during the test, formatted as in production."""
    handler = LogCapture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
