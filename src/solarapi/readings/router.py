"""HTTP endpoints of readings: request parsing and response shaping only."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from solarapi.auth.principal import get_principal
from solarapi.db import DATA_VERSION, RequestSession
from solarapi.errors import ValidationFailed
from solarapi.kit.bodylimit import UPLOAD_BODY, body_limit
from solarapi.kit.direct_endpoints import direct, direct_query, query_parameter
from solarapi.kit.grid import parse_series_query
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import QUERY_INSTANT, QUERY_INTERVAL
from solarapi.kit.timefmt import utcnow
from solarapi.kit.versioned import VersionedCache
from solarapi.readings import service, upload
from solarapi.readings.rendering import render
from solarapi.readings.schemas import UPLOAD_SCHEMA, ReadingsOut, UploadResultOut
from solarapi.systems.access import read_system

router = APIRouter(tags=["Readings"])


# Rendered readings bodies, at most 64 MB of them, each while the database is unchanged.
_BODIES = VersionedCache[bytes](maxsize=64 * 2**20, getsizeof=len)


@router.get(
    "/systems/{system_id}/readings",
    response_model=ReadingsOut,
    summary="Energy production aggregated into buckets",
    description=(
        "Buckets follow the system's local clock: `15m`, `30m` and `1h` its local time "
        "(the UTC grid in whole-hour zones; 12:00–13:00 IST in Kolkata), `1d`, `1w` "
        "(Monday) and `1M` its local calendar. `from` (inclusive) and `to` (exclusive) are widened to the "
        "grid and echoed in `meta`. Gaps are `null` with `samples: 0`. At most 10,000 buckets."
    ),
    openapi_extra={
        "parameters": [
            query_parameter("from", "RFC 3339 with a zone; default to − 24 h", QUERY_INSTANT),
            query_parameter("to", "RFC 3339 with a zone; default now", QUERY_INSTANT),
            query_parameter("interval", "15m, 30m, 1h (default), 1d, 1w or 1M", QUERY_INTERVAL),
        ]
    },
)
@direct
async def get_readings(system_id: str, request: Request) -> Response:
    # The hottest read of the API takes its query, principal and session straight from the
    # request, and the gateway calls it directly (`kit.direct_endpoints`): FastAPI's routing,
    # parameter and dependency solving cost ~0.3 ms of CPU per request here, more than
    # bucketing and rendering a day together (bench/readings/README.md). The parameters are
    # plain strings either way (every check is ours), and are documented above; the gateway
    # has parsed them already.
    principal = await get_principal(request)
    params = direct_query(request.scope)
    now = utcnow()
    query = parse_series_query(params.get("interval"), params.get("from"), params.get("to"), now)
    # The body of a stored series is a function of the database alone (a simulated one also
    # of `now`), so it is kept while the database is unchanged (`kit.versioned`); the key
    # holds the caller's tenancy, so it is only ever given to whom it was rendered for.
    version = request.scope.get("state", {}).get(DATA_VERSION)
    # Flat: a tuple of the query's fields hashes and compares in C, the query itself in Python.
    # Of plain strings and datetimes, not the enums (objects the garbage collector tracks):
    # the collector then stops tracking each key at its first collection, so a fleet's ~15k
    # kept bodies add nothing to what every full collection walks while requests wait.
    # (`_value_`, the enums' own attribute: `.value` is a property, two Python calls each.)
    key = (
        principal.account_id,
        principal.environment._value_,
        system_id,
        query.interval._value_,
        query.start,
        query.end,
    )

    async def read() -> tuple[bytes, bool]:
        async with RequestSession(request) as session:
            readings = await service.read_readings(session, principal, system_id, query, now)
        return render(readings), not readings.simulated

    body = await _BODIES.get_or_make(key, version, read)
    return Response(body, 200, None, "application/json")  # (by position: no kwargs dict)


@router.post(
    "/systems/{system_id}/readings",
    response_model=UploadResultOut,
    summary="Upload 15-minute readings (idempotent upsert, all or nothing)",
    description=(
        "Up to 10,000 readings; `timestamp` is the start of a 15-minute interval that has "
        "ended. One invalid item → 400 naming it (`readings[3].energy_wh: …`) and nothing is "
        "stored. A simulated system → 409."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": UPLOAD_SCHEMA}},
        }
    },
)
@body_limit(UPLOAD_BODY)
@direct
async def upload_readings(system_id: str, request: Request) -> Response:
    # Called by the gateway directly (`kit.direct_endpoints`) unless the request carries an
    # Idempotency-Key: a meter's hourly upload is the most frequent write of the API.
    # The body is decoded and checked by hand (orjson + one pass) instead of through a
    # pydantic model: for 10,000 items that validation cost more than storing them.
    principal = await get_principal(request)
    raw = await request.body()
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None
    batch = upload.batch_from_json(payload)
    upload.refuse_duplicate_keys(raw, payload)
    async with RequestSession(request) as session:
        result = await upload.upload_to_system(
            session,
            system_id,
            principal.account_id,
            principal.environment.value,
            batch,
            utcnow(),
            read=lambda: read_system(session, principal, system_id),
        )
    return OrjsonResponse(result.to_api())
