"""HTTP endpoints of performance and irradiance: request parsing and response shaping only."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.errors import ValidationFailed
from solarapi.kit.bodylimit import UPLOAD_BODY, body_limit
from solarapi.kit.grid import QUARTER_S, Interval, parse_range, parse_series_query
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import QUERY_INSTANT, query_enum
from solarapi.kit.timefmt import format_timestamp, utcnow
from solarapi.kit.versioned import VersionedCache
from solarapi.performance import service, upload
from solarapi.performance.rendering import render, render_irradiance
from solarapi.performance.schemas import IrradianceItem, IrradianceListOut, PerformanceOut
from solarapi.readings.schemas import UploadResultOut
from solarapi.systems.access import get_system, read_system

router = APIRouter(tags=["Performance"])

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

# Rendered bodies, at most 32 MB of them, each while its system's data and model fields are
# unchanged (`service.data_version`, kept with `kit.versioned`): a dashboard reading a month
# twice models it once, and commits of other systems (loggers uploading all day) leave it.
_BODIES = VersionedCache[bytes](maxsize=32 * 2**20, getsizeof=len)


@router.get(
    "/systems/{system_id}/performance",
    response_model=PerformanceOut,
    summary="Expected against actual: PR, temperature-corrected PR, EPI and quality flags",
    description=(
        "Per bucket of the system's local calendar (`1d` default, `1w`, `1M`): measured and "
        "modelled energy (pvlib PVWatts), plane-of-array insolation and its source "
        "(`sensor`, `satellite`, `typical` or `mixed`), specific and reference yield, "
        "performance ratio (null unless every counted quarter-hour has measured irradiance), "
        "temperature-corrected PR, energy performance index and quality flags. "
        "`meta.model` lists every parameter used. Range rules as readings."
    ),
)
async def get_performance(
    system_id: str,
    principal: PrincipalDep,
    session: SessionDep,
    from_: FromParam = None,
    to: ToParam = None,
    interval: Annotated[
        str | None, Query(description="1d (default), 1w or 1M"), query_enum(service.INTERVALS)
    ] = None,
) -> Response:
    now = utcnow()
    query = parse_series_query(interval, from_, to, now, service.INTERVALS, Interval.DAY)
    # The system first (404 if not the caller's): its data version says whether a kept
    # answer still holds.
    system = await read_system(session, principal, system_id)
    # Flat: a tuple of the query's fields hashes and compares in C, the query itself in Python.
    key = (
        principal.account_id,
        principal.environment,
        system_id,
        query.interval,
        query.start,
        query.end,
    )

    async def make() -> tuple[bytes, bool]:
        performance = await service.performance(
            session, system, query.start, query.end, query.interval, now
        )
        return render(performance), True

    # A simulated system's answer depends on `now` too: never kept (version None).
    body = await _BODIES.get_or_make(key, service.data_version(system), make)
    return Response(body, media_type="application/json")


_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["readings"],
    "additionalProperties": False,
    "properties": {
        "readings": {
            "type": "array",
            "minItems": 1,
            "maxItems": upload.MAX_UPLOAD,
            "items": IrradianceItem.model_json_schema(),
        }
    },
}


@router.post(
    "/systems/{system_id}/irradiance",
    response_model=UploadResultOut,
    summary="Upload 15-minute plane-of-array irradiance (idempotent upsert, all or nothing)",
    description=(
        "Up to 10,000 quarter-hour means; `timestamp` is the start of a 15-minute interval "
        "that has ended; `poa_w_m2` 0 … 1,500; temperatures −50 … 100 °C. One invalid item → "
        "400 naming it and nothing is stored. A simulated system → 409."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _UPLOAD_SCHEMA}},
        }
    },
)
@body_limit(UPLOAD_BODY)
async def upload_irradiance(
    system_id: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    try:
        payload = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None
    # Every rule of the batch holds or fails whatever the system: checked before it is read
    # (the contract's order of checks, 400 before 404).
    valid = upload.validate(upload.batch_from_json(payload), utcnow())
    system = await get_system(session, principal, system_id)
    result = await upload.upload_irradiance(session, system, valid)
    return OrjsonResponse(result.to_api())


@router.get(
    "/systems/{system_id}/irradiance",
    response_model=IrradianceListOut,
    summary="Stored irradiance quarter-hours (sensor and satellite)",
    description=(
        "The quarter-hours stored in [from, to), in time order: uploaded `sensor` rows "
        "(plane of array) and imported `satellite` rows (GHI/DNI/DHI); null where not sent. "
        "A simulated (sandbox) system's `sensor` rows are the model's own plane-of-array "
        "irradiance and air temperature, which its performance uses. At most 31 days per "
        "request."
    ),
)
async def get_irradiance(
    system_id: str,
    principal: PrincipalDep,
    session: SessionDep,
    from_: FromParam = None,
    to: ToParam = None,
) -> Response:
    start, end = parse_range(from_, to, utcnow())
    if start >= end:
        raise ValidationFailed(
            f"'from' must be before 'to'; got from={format_timestamp(start)} "
            f"and to={format_timestamp(end)}"
        )
    if end - start > MAX_IRRADIANCE_SPAN:
        raise ValidationFailed("the range may span at most 31 days; ask for it in parts")
    start_s = int(start.timestamp() // 1)
    end_s = int(-(-end.timestamp() // 1))
    start_s -= start_s % QUARTER_S
    sensor, satellite = await service.read_irradiance(
        session, principal, system_id, start_s, end_s, utcnow()
    )
    return Response(render_irradiance(sensor, satellite), media_type="application/json")


MAX_IRRADIANCE_SPAN = timedelta(days=31)
