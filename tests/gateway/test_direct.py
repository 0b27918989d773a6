"""`@direct` endpoints: the gateway calls them itself, past FastAPI's router and handler.

The route table must pick them (with their converted path parameters) only for the one GET
(and its HEAD) or POST they serve,
and what a client sees must not change: errors in the `{error, code}` shape with the
gateway's headers, gzip when asked for, HEAD without a body, the FastAPI route still in the
OpenAPI document.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from solarapi.auth.scopes import API_PREFIX
from solarapi.gateway import RouteTable
from solarapi.ingest.router import ingest_readings
from solarapi.kit.bodylimit import body_limit
from solarapi.kit.direct_endpoints import direct
from solarapi.readings.router import get_readings, upload_readings
from solarapi.systems.router import list_systems
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload


@direct
async def _item(request: Request, n: int) -> Response:
    return Response(str(n * 2))


@body_limit(1234)
@direct
async def _posted(request: Request, n: int) -> Response:
    return Response(str(n))


async def _plain(request: Request) -> Response:
    return Response("plain")


def _table_of(router: APIRouter) -> RouteTable:
    """The routing table of an app serving `router` under the API prefix."""
    served = FastAPI()
    served.include_router(router, prefix=API_PREFIX)
    return RouteTable.from_routes(served.router.routes)


def test_route_table_picks_direct_gets_with_their_converted_parameters() -> None:
    router = APIRouter()
    router.add_api_route("/items/{n:int}", _item, methods=["GET"])
    router.add_api_route("/items/{n:int}", _plain, methods=["DELETE"])
    router.add_api_route("/other", _plain, methods=["GET"])
    table = _table_of(router)

    found = table.match("/api/v1/items/21", "GET")
    assert (found.endpoint, found.params) == (_item, {"n": 21})
    assert table.match("/api/v1/items/21", "HEAD").endpoint is _item
    assert table.match("/api/v1/items/21", "DELETE").endpoint is None
    assert table.match("/api/v1/items/21", "POST").endpoint is None
    assert table.match("/api/v1/other", "GET").endpoint is None


def test_direct_is_refused_on_anything_but_one_get_or_post() -> None:
    for methods in (["DELETE"], ["PATCH"], ["GET", "POST"]):
        router = APIRouter()
        router.add_api_route("/items/{n:int}", _item, methods=methods)
        with pytest.raises(ValueError, match="one GET or POST endpoint"):
            _table_of(router)


def test_a_direct_post_keeps_its_body_limit() -> None:
    router = APIRouter()
    router.add_api_route("/items/{n:int}", _posted, methods=["POST"])
    found = _table_of(router).match("/api/v1/items/3", "POST")
    assert (found.endpoint, found.params, found.body_limit) == (_posted, {"n": 3}, 1234)
    assert _table_of(router).match("/api/v1/items/3", "GET").endpoint is None


def test_the_hot_endpoints_are_served_directly(app: FastAPI) -> None:
    table = app.state.route_table
    found = table.match("/api/v1/systems/sys_1/readings", "GET")
    assert (found.endpoint, found.params) == (get_readings, {"system_id": "sys_1"})
    found = table.match("/api/v1/systems/sys_1/readings", "POST")
    assert (found.endpoint, found.params) == (upload_readings, {"system_id": "sys_1"})
    assert table.match("/api/v1/ingest/readings", "POST").endpoint is ingest_readings
    assert table.match("/api/v1/systems", "GET").endpoint is list_systems
    assert table.match("/api/v1/systems", "POST").endpoint is None


async def test_a_direct_post_with_an_idempotency_key_is_still_idempotent(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The direct call would skip the idempotency middleware: a POST carrying a key must take
    FastAPI's stack, so its repeat is a replay, not a second upload."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        body = {"readings": quarter_series(datetime(2025, 6, 1, tzinfo=UTC), 4, 250.0)}
        path = f"/api/v1/systems/{system_id}/readings"
        headers = {"Idempotency-Key": "direct-post-1"}
        first = await client.post(path, json=body, headers=headers)
        again = await client.post(path, json=body, headers=headers)
        assert first.status_code == again.status_code == 200, first.text
        assert first.json() == again.json() == {"received": 4, "inserted": 4, "updated": 0}
        assert again.headers["Idempotent-Replayed"] == "true"
        # Without the key the same body goes again, directly: now an update of all four.
        plain = await client.post(path, json=body)
        assert plain.json() == {"received": 4, "inserted": 0, "updated": 4}
        assert "Idempotent-Replayed" not in plain.headers


async def test_direct_answers_look_like_any_other(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(
            client, system_id, quarter_series(datetime(2025, 6, 1, tzinfo=UTC), 96 * 3, 250.0)
        )
        assert response.status_code == 200, response.text
        path = f"/api/v1/systems/{system_id}/readings"
        params = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-04T00:00:00Z", "interval": "1h"}

        plain = await client.get(path, params=params, headers={"Accept-Encoding": "identity"})
        assert plain.status_code == 200
        assert "content-encoding" not in plain.headers
        assert len(plain.json()["data"]) == 72
        assert plain.headers["x-ratelimit-limit"]
        assert plain.headers["x-request-id"]

        # Compressed as the gzip layer does for every endpoint (httpx decodes it).
        packed = await client.get(path, params=params, headers={"Accept-Encoding": "gzip"})
        assert packed.headers["content-encoding"] == "gzip"
        assert int(packed.headers["content-length"]) < len(plain.content)
        assert packed.content == plain.content

        head = await client.head(path, params=params, headers={"Accept-Encoding": "identity"})
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-length"] == plain.headers["content-length"]

        missing = await client.get("/api/v1/systems/sys_nope/readings")
        assert missing.status_code == 404
        assert missing.json() == {"error": "No system with id 'sys_nope'", "code": "not_found"}
        assert missing.headers["x-ratelimit-remaining"]
        assert missing.headers["x-request-id"]

        bad = await client.get(path, params={"interval": "2h"})
        assert bad.status_code == 400
        assert bad.json()["code"] == "validation"


async def test_the_direct_route_stays_in_the_openapi_document(app: FastAPI) -> None:
    async with client_for(app) as client:
        document = (await client.get("/api/v1/openapi.json")).json()
    operation = document["paths"]["/api/v1/systems/{system_id}/readings"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"system_id", "from", "to", "interval"}
