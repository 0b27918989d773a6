"""`GET /systems` renders its page straight from the driver's rows (`views.listed_items`) and
`kit.pagination` writes the Link header from the path when the query is only paging: every response
here is compared, byte for byte, with what the list answered before — each system through
the ORM, `SystemView.of(system).render()`, the page sliced from the environment's systems in
`created_at`, `id` order and `kit.pagination.page_response` around it — for every page of
every page size and filter, on each database."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import httpx
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from solarapi.kit.pagination import PageParams, page_response
from solarapi.kit.plans import Environment
from solarapi.systems import repository
from solarapi.systems.views import SystemView
from tests.support import Tenant, TestClock, assert_error, client_for
from tests.systems.factories import create_system, quarter_series, upload


async def _old_answer(
    app: FastAPI, tenant: Tenant, environment: Environment, params: dict[str, Any]
) -> Response:
    """The list's answer as the ORM path made it."""
    async with app.state.sessionmaker() as session:
        systems = await repository.list_for_account(session, tenant.account_id, environment)
    status, zone = params.get("status"), params.get("market_zone")
    matching = [
        system
        for system in systems
        if (status is None or system.status == status)
        and (zone is None or system.market_zone == zone)
    ]
    page = PageParams(page=int(params.get("page", 1)), limit=int(params.get("limit", 50)))
    items = [
        SystemView.of(system).render()
        for system in matching[page.offset : page.offset + page.limit]
    ]
    scope = {
        "type": "http",
        "path": "/api/v1/systems",
        "query_string": urlencode(params).encode(),
        "headers": [],
    }
    return page_response(Request(scope), items, len(matching), page)


async def _assert_same(
    app: FastAPI,
    client: httpx.AsyncClient,
    tenant: Tenant,
    environment: Environment,
    params: dict[str, Any],
) -> None:
    # A simulated system's last reading is the last quarter-hour ended by now: the answer
    # is made between the two old ones, so it equals one of them.
    before = await _old_answer(app, tenant, environment, params)
    response = await client.get(
        "/api/v1/systems", params=params, headers={"Accept-Encoding": "identity"}
    )
    after = await _old_answer(app, tenant, environment, params)
    assert response.status_code == 200, response.text
    assert response.content in (before.body, after.body), params
    old_headers = [(name.decode(), value.decode()) for name, value in before.raw_headers]
    new_headers = [
        (name, value) for name, value in response.headers.items() if name in dict(old_headers)
    ]
    assert new_headers == old_headers, params


async def test_every_page_is_the_old_answer(
    app: FastAPI, enterprise: Tenant, clock: TestClock
) -> None:
    clock.pinned = time.time()
    async with client_for(app, enterprise.live) as live, client_for(app, enterprise.test) as test:
        made = [
            await create_system(live, name="plain"),
            await create_system(
                live,
                name='Dak "Zuid" — ÆØÅ ☀',
                inverter_capacity_kw=None,
                installed_on="0999-03-01",
                market_zone="BE",
                status="inactive",
                model={"gamma_pdc_pct_per_c": -0.29, "losses_pct": 9.5, "inverter_efficiency": 1},
                monitoring={
                    "enabled": False,
                    "offline_after_hours": 24,
                    "underperformance_threshold": 0.65,
                },
            ),
            await create_system(
                live,
                name="no zone",
                market_zone=None,
                location={
                    "latitude": -33.9,
                    "longitude": 18.4,
                    "timezone": "Africa/Johannesburg",
                },
                status="decommissioned",
                capacity_kwp=5,
                model={"losses_pct": 0},
            ),
        ]
        for i in range(9):
            made.append(
                await create_system(
                    live,
                    name=f"s{i}",
                    status=("active", "inactive")[i % 2],
                    market_zone=("NL", "BE", "DE-LU")[i % 3],
                    installed_on=f"2024-0{i % 9 + 1}-1{i}",
                    capacity_kwp=1.1 + i,
                )
            )
        for system, day in ((made[0], 1), (made[4], 20)):
            readings = quarter_series(datetime(2025, 6, day, 10, 15, tzinfo=UTC), 3)
            assert (await upload(live, system["id"], readings)).status_code == 200
        await create_system(test, name="simulated", installed_on="2025-01-15")
        await create_system(test, name="simulated, not installed")
        await create_system(test, name="metered", data_source="metered")

        filters: list[dict[str, Any]] = [
            {},
            {"status": "active"},
            {"status": "inactive"},
            {"status": "decommissioned"},
            {"market_zone": "BE"},
            {"market_zone": "NL", "status": "active"},
            {"market_zone": "SE3"},  # none
        ]
        for client, environment in ((live, Environment.LIVE), (test, Environment.TEST)):
            for chosen in filters:
                clock.pinned += 61  # a fresh minute of the rate limit for each filter's ~40
                for limit in (None, 1, 2, 5, 100):
                    size = limit or 50
                    for number in (None, *range(1, 12 // size + 3), 1_000_000_000):
                        params = dict(chosen)
                        if number is not None:
                            params["page"] = number
                        if limit is not None:
                            params["limit"] = limit
                        await _assert_same(app, client, enterprise, environment, params)
            # Other parameters are kept in the links, in their order (`page_response`).
            for params in (
                {"limit": 2, "page": 2, "market_zone": "NL"},
                {"page": 1, "other": "x y", "limit": 3},
            ):
                await _assert_same(app, client, enterprise, environment, params)

        clock.pinned += 61
        for query in ("page=0", "page=abc", "limit=101", "status=gone", "market_zone=ZZ"):
            assert_error(await live.get(f"/api/v1/systems?{query}"), 400, "validation")
