"""HTTP endpoints of the portfolio: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.kit.grid import ALL_INTERVALS, Interval, parse_series_query
from solarapi.kit.openapi_fields import (
    QUERY_INSTANT,
    QUERY_ZONE,
    query_count,
    query_enum,
    query_text,
)
from solarapi.kit.pagination import PAGE_NUMBER, link_header
from solarapi.kit.timefmt import utcnow
from solarapi.models.systems import SYSTEM_STATUSES
from solarapi.portfolio import service
from solarapi.portfolio.fleet import DEFAULT_LIMIT, MAX_LIMIT, Fleet, parse_fleet
from solarapi.portfolio.rendering import render_market_value, render_readings, render_summary
from solarapi.portfolio.schemas import FleetReadingsOut, FleetSummaryOut, FleetValueOut

router = APIRouter(tags=["Portfolio"])

_COMMON = (
    "The key environment's systems, filtered like `GET /systems` (`status`, `market_zone`) "
    "and optionally by `system_ids` (comma-separated, 1–1,000; an id that is not yours → 404 "
    "naming it), ordered by `created_at`, `id`, and paged over systems (`page`, `limit` "
    "1–1,000, default 100). Counted once in the rate limits. Every number equals what the "
    "per-system endpoint answers for the same system; `meta.totals` covers every matching "
    "system, not only the page."
)

Status = Annotated[
    str | None,
    Query(description="active, inactive or decommissioned"),
    query_enum(SYSTEM_STATUSES),
]
MarketZone = Annotated[str | None, Query(description="A zone code such as NL"), QUERY_ZONE]
SystemIds = Annotated[
    str | None,
    Query(description="Comma-separated system ids, 1–1,000, each at most once"),
    query_text(
        {
            "pattern": "^[^,\\u0000]+(,[^,\\u0000]+)*$",
            "description": "Comma-separated system ids, 1–1,000, each at most once (a "
            "repeated id → 400; an id that is not yours → 404 naming it)",
        }
    ),
]
Page = Annotated[str | None, Query(description="Page number (default 1)"), PAGE_NUMBER]
Limit = Annotated[
    str | None,
    Query(description="Systems per page, 1–1,000 (default 100)"),
    query_count(MAX_LIMIT, DEFAULT_LIMIT),
]
From = Annotated[
    str | None, Query(alias="from", description="RFC 3339; default to − 24 h"), QUERY_INSTANT
]
To = Annotated[str | None, Query(description="RFC 3339; default now"), QUERY_INSTANT]
# The buckets of the fleet's series when `interval` is not given.
_DEFAULT_INTERVAL = Interval.DAY
IntervalParam = Annotated[
    str | None,
    Query(description="15m, 30m, 1h, 1d (default), 1w, 1M"),
    query_enum(ALL_INTERVALS, default=_DEFAULT_INTERVAL),
]


def _paged(request: Request, body: bytes, fleet: Fleet[Any]) -> Response:
    response = Response(body, media_type="application/json")
    response.headers["Link"] = link_header(request, fleet.page, len(fleet.systems))
    return response


@router.get(
    "/portfolio/readings",
    response_model=FleetReadingsOut,
    summary="Readings of many systems in one request",
    description=_COMMON + " Each system's buckets follow its own grid and are widened as "
    "`GET /systems/{id}/readings` widens them; a page whose systems × buckets exceed "
    "100,000 → 400 naming the largest `limit` that fits.",
)
async def portfolio_readings(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    status: Status = None,
    market_zone: MarketZone = None,
    system_ids: SystemIds = None,
    page: Page = None,
    limit: Limit = None,
    from_: From = None,
    to: To = None,
    interval: IntervalParam = None,
) -> Response:
    query = parse_fleet(
        status=status, market_zone=market_zone, system_ids=system_ids, page=page, limit=limit
    )
    now = utcnow()
    series = parse_series_query(interval, from_, to, now, default=_DEFAULT_INTERVAL)
    result = await service.fleet_readings(session, principal, query, series, now)
    return _paged(request, render_readings(result), result.fleet)


@router.get(
    "/portfolio/summary",
    response_model=FleetSummaryOut,
    summary="Summaries of many systems in one request",
    description=_COMMON
    + " Per system the `GET /systems/{id}/summary` object plus `system_id`; `meta.totals` "
    "sums the non-null energies, the capacity, counts the systems and those with a reading "
    "in their local today, and gives today's specific yield of the reporting systems.",
)
async def portfolio_summary(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    status: Status = None,
    market_zone: MarketZone = None,
    system_ids: SystemIds = None,
    page: Page = None,
    limit: Limit = None,
) -> Response:
    query = parse_fleet(
        status=status, market_zone=market_zone, system_ids=system_ids, page=page, limit=limit
    )
    result = await service.fleet_summary(session, principal, query, utcnow())
    return _paged(request, render_summary(result), result.fleet)


@router.get(
    "/portfolio/market-value",
    response_model=FleetValueOut,
    summary="Market value of many systems in one request, with per-zone totals",
    description=_COMMON
    + " Per system the `GET /systems/{id}/market-value` series and totals (a system without "
    "`market_zone` is listed with null values and no buckets); `meta.zones` one object per "
    "zone with the trader's totals (capture price, baseload price, capture rate, "
    "negative-price energy and value); `meta.totals` the same over all zones (baseload and "
    "capture rate null when several zones are mixed).",
)
async def portfolio_market_value(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    status: Status = None,
    market_zone: MarketZone = None,
    system_ids: SystemIds = None,
    page: Page = None,
    limit: Limit = None,
    from_: From = None,
    to: To = None,
    interval: IntervalParam = None,
) -> Response:
    query = parse_fleet(
        status=status, market_zone=market_zone, system_ids=system_ids, page=page, limit=limit
    )
    now = utcnow()
    series = parse_series_query(interval, from_, to, now, default=_DEFAULT_INTERVAL)
    result = await service.fleet_market_value(session, principal, query, series, now)
    return _paged(request, render_market_value(result), result.fleet)
