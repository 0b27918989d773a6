"""The health short-circuit: load balancers poll /health, so the gateway answers it itself,
never refused and never counted in a window."""

from __future__ import annotations

from starlette.types import ASGIApp

from solarapi.gateway.exchange import Exchange
from solarapi.health.service import health_response

HEALTH = "/health"  # below the API prefix


async def health_answer(exchange: Exchange) -> ASGIApp:
    return health_response(await exchange.state.health.checks())
