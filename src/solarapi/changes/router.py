"""HTTP endpoint of the change feed: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response, StreamingResponse

from solarapi.auth.principal import PrincipalDep
from solarapi.changes import service
from solarapi.changes.rendering import NDJSON, render_json, render_ndjson, wants_stream
from solarapi.changes.schemas import ChangesOut
from solarapi.db import SessionDep
from solarapi.kit.openapi_fields import query_count, query_text
from solarapi.kit.timefmt import utcnow
from solarapi.state import settings_of

router = APIRouter(tags=["Readings"])

# What `cursor` and `limit` accept (`service.read_changes`, `service.parse_limit`).
_CURSOR = query_text(
    {
        "pattern": "^[A-Za-z0-9_-]{55}([A-Za-z0-9_-]{11})?$",
        "description": "`next_cursor` of an earlier answer to this key's account and "
        "environment, at most 30 days old (else 400)",
    }
)
_LIMIT = query_count(
    service.MAX_LIMIT,
    service.DEFAULT_LIMIT,
    description=f"1–{service.MAX_LIMIT:,} (default {service.DEFAULT_LIMIT:,}); with `Accept: "
    f"application/x-ndjson` 1–{service.MAX_STREAM_LIMIT:,} (default {service.MAX_STREAM_LIMIT:,})",
)


@router.get(
    "/readings/changes",
    response_model=ChangesOut,
    summary="Readings inserted or replaced after a cursor (incremental sync)",
    description=(
        "The environment's stored quarter-hour readings that were inserted or replaced after "
        "`cursor`, in commit order; no `cursor` starts at the first stored reading. Follow "
        "`next_cursor` until `has_more` is false and apply rows in order (a later row for the "
        "same system and timestamp replaces an earlier one): the copy then equals the stored "
        "readings — no change is skipped, even one whose transaction was still open when an "
        "earlier page was read. Cursors are signed, bound to the key's account and "
        "environment, and valid for 30 days; any other → 400. With "
        "`Accept: application/x-ndjson` the answer is one JSON object per line (up to "
        "100,000 rows, `limit` up to 100,000) and its last line is "
        '`{"next_cursor": …, "has_more": …}`. Simulated systems are not in the feed; a '
        "deleted system's readings are not delivered after its deletion."
    ),
    responses={
        200: {
            "content": {
                NDJSON: {
                    "schema": {
                        "type": "string",
                        "description": "One JSON object per line; the last holds "
                        "`next_cursor` and `has_more`",
                    }
                }
            }
        }
    },
)
async def read_changes(
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
    cursor: Annotated[
        str | None,
        Query(description="`next_cursor` of the previous page; none = from the start"),
        _CURSOR,
    ] = None,
    limit: Annotated[
        str | None,
        Query(description="Rows per page, 1–10,000 (default 1,000); NDJSON 1–100,000 (default)"),
        _LIMIT,
    ] = None,
) -> Response:
    stream = wants_stream(request.headers.get("accept", ""))
    page = await service.read_changes(
        session,
        principal,
        cursor,
        service.parse_limit(limit, stream=stream),
        secret=settings_of(request).effective_secret_key,
        now=utcnow(),
    )
    if stream:
        return StreamingResponse(render_ndjson(page), media_type=NDJSON)
    return Response(render_json(page), media_type="application/json")
