"""HTTP endpoints of prices: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.kit.grid import Interval, parse_series_query
from solarapi.kit.openapi_fields import QUERY_INSTANT, QUERY_INTERVAL, query_enum
from solarapi.kit.timefmt import utcnow
from solarapi.kit.zones import ZONES
from solarapi.prices import market_value, service
from solarapi.prices.rendering import render_market_prices, render_zones
from solarapi.prices.schemas import MarketValueSeries, PriceSeries, ZoneList

router = APIRouter(tags=["Market prices"])

FromParam = Annotated[
    str | None,
    Query(alias="from", description="RFC 3339 with a zone; inclusive (default: `to` − 24 h)"),
    QUERY_INSTANT,
]
ToParam = Annotated[
    str | None,
    Query(description="RFC 3339 with a zone; exclusive (default: now)"),
    QUERY_INSTANT,
]


@router.get(
    "/market-prices/zones", response_model=ZoneList, summary="Bidding zones with day-ahead prices"
)
async def list_zones(principal: PrincipalDep) -> Response:
    return Response(render_zones(service.zone_list()), media_type="application/json")


@router.get(
    "/market-prices",
    response_model=PriceSeries,
    summary="Day-ahead prices of a zone, per bucket",
    description="Time-weighted mean of the prices covering each bucket; a bucket finer than "
    "the published resolution carries the covering price; `null` where no price is known. "
    "`1d`, `1w` and `1M` buckets follow the zone's local calendar. `meta.totals`: the "
    "baseload (time-weighted mean), minimum and maximum price and the counts of priced and "
    "negative quarter-hours of the widened range. Sandbox keys get simulated prices.",
)
async def get_market_prices(
    principal: PrincipalDep,
    session: SessionDep,
    # Required, but refused by `service.find_zone` (the contract's message), not by FastAPI.
    zone: Annotated[
        str | None, Query(description="Zone code, e.g. NL"), query_enum(ZONES, required=True)
    ] = None,
    from_: FromParam = None,
    to: ToParam = None,
    interval: Annotated[
        str | None,
        Query(description="15m, 1h (default), 1d, 1w or 1M"),
        query_enum(service.PRICE_INTERVALS),
    ] = None,
) -> Response:
    # The contract's order of 400s: the zone, the interval, then the range.
    priced_zone = service.find_zone(zone)
    query = parse_series_query(
        interval, from_, to, utcnow(), service.PRICE_INTERVALS, Interval.HOUR
    )
    prices = await service.market_prices(session, principal.environment, priced_zone, query)
    return Response(render_market_prices(prices), media_type="application/json")


@router.get(
    "/systems/{system_id}/market-value",
    response_model=MarketValueSeries,
    tags=["Market value"],
    summary="A system's production valued at its zone's day-ahead price",
    description="Each quarter-hour's energy × the price covering it, summed per bucket (so a "
    "sunny hour with a negative price has a negative value). `value_eur` is null where no "
    "quarter-hour of the bucket has both energy and price; `meta.totals.value_eur` sums the "
    "non-null values. A system without `market_zone` → 409.",
    responses={
        409: {
            "description": "The system has no `market_zone`, or no prices are known for the "
            "range (`conflict`)"
        }
    },
)
async def get_market_value(
    system_id: str,
    principal: PrincipalDep,
    session: SessionDep,
    from_: FromParam = None,
    to: ToParam = None,
    interval: Annotated[
        str | None, Query(description="15m, 30m, 1h (default), 1d, 1w or 1M"), QUERY_INTERVAL
    ] = None,
) -> Response:
    now = utcnow()
    # (400s in the order the contract lists them: the interval, then the range)
    query = parse_series_query(interval, from_, to, now)
    value = await market_value.read_market_value(session, principal, system_id, query, now)
    return Response(market_value.render(value), media_type="application/json")
