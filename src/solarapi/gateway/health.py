"""The health short-circuit: load balancers poll /health (readiness) and orchestrators
/health/live (liveness), so the gateway answers both itself, never refused and never counted
in a window. /health/live consults nothing at all — not even the rate limiter's store for its
headers: it must answer while the database and Redis do not."""

from __future__ import annotations

from starlette.types import ASGIApp

from solarapi.gateway.exchange import Exchange
from solarapi.health.service import health_response, live_response

HEALTH = "/health"  # below the API prefix
LIVE = "/health/live"


async def health_answer(exchange: Exchange) -> ASGIApp:
    return health_response(await exchange.state.health.checks())


def live_answer() -> ASGIApp:
    return live_response()
