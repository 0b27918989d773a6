"""The end of every request: its session closed, its metrics recorded, its log line written."""

from __future__ import annotations

import logging
import time

from solarapi.auth.principal import Principal
from solarapi.dashboard.sessions import WebUser
from solarapi.db import REQUEST_SESSION, untouched
from solarapi.gateway.exchange import Exchange

log = logging.getLogger("solarapi.request")


async def finish(exchange: Exchange) -> None:
    scope, state = exchange.scope, exchange.state
    scope_state = scope["state"]
    session = scope_state.pop(REQUEST_SESSION, None)
    if session is not None and not untouched(session):
        try:
            await session.close()
        except Exception:
            log.exception(
                "closing the request's session", extra={"request_id": exchange.request_id}
            )
    elapsed = time.perf_counter() - exchange.started
    route = exchange.route
    if state.metrics is not None:
        api = route != "-" or scope["path"].startswith("/api/")
        state.metrics.request(
            route if api else "dashboard", exchange.method, exchange.status, elapsed
        )
    if not log.isEnabledFor(logging.INFO):
        return
    principal = scope_state.get("principal")
    caller = principal if isinstance(principal, Principal) else None
    # A dashboard page: the signed-in person, so a page's line names its account too.
    web_user = scope_state.get("web_user") if caller is None else None
    person = web_user if isinstance(web_user, WebUser) else None
    log.info(
        "request",
        extra={
            "request_id": exchange.request_id,
            "method": exchange.method,
            "route": route,
            "path": scope["path"],
            "status": exchange.status,
            "latency_ms": round(elapsed * 1000, 2),
            "key_id": caller.key_id if caller else None,
            "key": caller.key_display if caller else None,
            "account_id": caller.account_id if caller else (person.account_id if person else None),
            "user_id": person.user_id if person else None,
            "client_ip": exchange.client_ip,
        },
    )
