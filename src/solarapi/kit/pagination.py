"""The one pagination helper: `page`/`limit` parsing, the envelope and the RFC 8288 Link header."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Query, Request
from starlette.responses import Response

from solarapi.errors import ValidationFailed
from solarapi.kit.jsonresp import OrjsonResponse

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
# ASCII digits only: int() would also take "+5", " 5", "5_0" and non-Latin digits.
_DIGITS = re.compile(r"[0-9]{1,1000}")
# Both databases keep OFFSET in a signed 64-bit integer; any page this far out is past the
# end of every list, so the offset is capped instead of overflowing into a 500.
_MAX_OFFSET = 2**62


@dataclass(frozen=True, slots=True)
class PageParams:
    page: int
    limit: int

    @property
    def offset(self) -> int:
        return min((self.page - 1) * self.limit, _MAX_OFFSET)


def _parse_positive(name: str, raw: str | None, default: int, upper: int | None) -> int:
    if raw is None or raw == "":
        return default
    value = int(raw) if _DIGITS.fullmatch(raw) else 0
    bad = value < 1 or (upper is not None and value > upper)
    if bad:
        bounds = f"between 1 and {upper}" if upper is not None else "at least 1"
        raise ValidationFailed(f"{name} must be an integer {bounds}; got '{raw}'")
    return value


def page_params(
    page: Annotated[str | None, Query(description="Page number, ≥ 1 (default 1)")] = None,
    limit: Annotated[str | None, Query(description="Items per page, 1–100 (default 50)")] = None,
) -> PageParams:
    return PageParams(
        page=_parse_positive("page", page, 1, None),
        limit=_parse_positive("limit", limit, DEFAULT_LIMIT, MAX_LIMIT),
    )


PageDep = Annotated[PageParams, Depends(page_params)]


def page_response(
    request: Request, items: list[dict[str, Any]], total: int, params: PageParams
) -> Response:
    total_pages = (total + params.limit - 1) // params.limit if total else 0
    body = {
        "data": items,
        "pagination": {
            "page": params.page,
            "limit": params.limit,
            "total": total,
            "total_pages": total_pages,
            "has_more": params.page < total_pages,
        },
    }
    response = OrjsonResponse(body)
    link = _link_header(request, params, total_pages)
    if link:
        response.headers["Link"] = link
    return response


def _link_header(request: Request, params: PageParams, total_pages: int) -> str:
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in ("page", "limit")]

    def url(page: int) -> str:
        qs = urlencode([*query, ("page", str(page)), ("limit", str(params.limit))])
        return f"{request.url.path}?{qs}"

    links: list[str] = []
    last = max(total_pages, 1)
    links.append(f'<{url(1)}>; rel="first"')
    if params.page > 1:
        links.append(f'<{url(min(params.page - 1, last))}>; rel="prev"')
    if params.page < total_pages:
        links.append(f'<{url(params.page + 1)}>; rel="next"')
    links.append(f'<{url(last)}>; rel="last"')
    return ", ".join(links)
