"""Failure rendering: an exception that escaped the app becomes the `{error, code}` 503 when
the database cannot serve, else a 500 that quotes the request id."""

from __future__ import annotations

import logging

from starlette.types import Receive

from solarapi.db import is_outage
from solarapi.errors import Unavailable, error_response, render_api_error
from solarapi.gateway.exchange import Exchange

log = logging.getLogger("solarapi.request")
_RATE_LIMIT_HEADER = b"x-ratelimit-limit"


async def answer_failure(exchange: Exchange, exc: Exception, receive: Receive) -> None:
    request_id = exchange.request_id
    if exchange.response_started:
        log.exception("error after the response started", extra={"request_id": request_id})
        return
    if not any(name == _RATE_LIMIT_HEADER for name, _ in exchange.extra):
        await exchange.peek_anonymous()
    state = exchange.state
    if await is_outage(exc, state.engine):
        if state.metrics is not None:
            state.metrics.database_down()
        log.error("database unavailable: %s", type(exc).__name__, extra={"request_id": request_id})
        response = render_api_error(Unavailable())
    else:
        log.exception("unhandled error", extra={"request_id": request_id})
        response = error_response(
            500,
            "server_error",
            f"Internal server error; quote request id {request_id} when reporting it",
        )
    await response(exchange.scope, receive, exchange.send)
