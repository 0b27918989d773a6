"""The one pagination helper: `page`/`limit` parsing, the envelope and the RFC 8288 Link header."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from solarapi.errors import ValidationFailed
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.openapi_fields import query_count
from solarapi.kit.text import excerpt

DEFAULT_LIMIT = 50
MAX_LIMIT = 100
# Far past the end of any list, and small enough that the page echoed in the envelope and
# its OFFSET stay within 64-bit integers (and JavaScript's exact integers).
MAX_PAGE = 1_000_000_000
# ASCII digits only: int() would also take "+5", " 5", "5_0" and non-Latin digits.
_DIGITS = re.compile(r"[0-9]{1,1000}")
# What `page` and the usual `limit` accept (`_parse_positive`).
PAGE_NUMBER = query_count(MAX_PAGE, 1)
PAGE_LIMIT = query_count(MAX_LIMIT, DEFAULT_LIMIT)


class Pagination(BaseModel):
    """The envelope's `pagination` object, in every list's OpenAPI schema."""

    page: Annotated[int, Field(ge=1, le=MAX_PAGE)]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)]
    total: Annotated[int, Field(ge=0)]
    total_pages: Annotated[int, Field(ge=0)]
    has_more: bool


@dataclass(frozen=True, slots=True)
class PageParams:
    page: int
    limit: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit


def _parse_positive(name: str, raw: str | None, default: int, upper: int) -> int:
    if raw is None:  # given empty: the gateway's 400 (`parse_query`)
        return default
    value = int(raw) if _DIGITS.fullmatch(raw) else 0
    if not 1 <= value <= upper:
        raise ValidationFailed(
            f"{name} must be an integer between 1 and {upper}; got '{excerpt(raw)}'"
        )
    return value


async def page_params(
    page: Annotated[
        str | None, Query(description="Page number, 1–1,000,000,000 (default 1)"), PAGE_NUMBER
    ] = None,
    limit: Annotated[
        str | None, Query(description="Items per page, 1–100 (default 50)"), PAGE_LIMIT
    ] = None,
) -> PageParams:
    return PageParams(
        page=_parse_positive("page", page, 1, MAX_PAGE),
        limit=_parse_positive("limit", limit, DEFAULT_LIMIT, MAX_LIMIT),
    )


def parse_page(
    page: str | None, limit: str | None, *, default_limit: int, max_limit: int
) -> PageParams:
    """`page` and `limit` of a list whose pages are not the usual 1–100 (the portfolio)."""
    return PageParams(
        page=_parse_positive("page", page, 1, MAX_PAGE),
        limit=_parse_positive("limit", limit, default_limit, max_limit),
    )


def link_header(request: Request, params: PageParams, total: int) -> str:
    """The RFC 8288 `Link` header of a page of a list of `total` items."""
    total_pages = (total + params.limit - 1) // params.limit if total else 0
    return _link_header(request, params, total_pages)


# async: FastAPI runs a plain `def` dependency in its thread pool, a thread hand-over per request.
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


# What a query of nothing but the page and its size may hold (`_link_prefix`).
_PAGING_NAMES = (b"page", b"limit")


def _link_prefix(request: Request) -> str:
    """The links' path and the query's other parameters, encoded once for the four links.
    A query of nothing but `page` and `limit` (a fleet's walk of a list) keeps none: the path
    alone, escaped as Starlette's `URL.path` writes it, with no `URL` or `QueryParams` built
    to find that out (tests/systems/test_list_rendering.py)."""
    query: bytes = request.scope["query_string"]
    if (
        b"%" not in query
        and b"+" not in query
        and all(field.partition(b"=")[0] in _PAGING_NAMES for field in query.split(b"&") if query)
    ):
        path: str = request.scope["path"]
        return path.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C") + "?"
    return _kept_prefix(request)


def _kept_prefix(request: Request) -> str:
    """`_link_prefix` of any query, through Starlette's `URL` and `QueryParams`."""
    kept = urlencode(
        [(k, v) for k, v in request.query_params.multi_items() if k not in ("page", "limit")]
    )
    return f"{request.url.path}?{kept}&" if kept else f"{request.url.path}?"


def _link_header(request: Request, params: PageParams, total_pages: int) -> str:
    # Page and limit are digits.
    prefix = _link_prefix(request)

    def url(page: int) -> str:
        return f"{prefix}page={page}&limit={params.limit}"

    links: list[str] = []
    last = max(total_pages, 1)
    links.append(f'<{url(1)}>; rel="first"')
    if params.page > 1:
        links.append(f'<{url(min(params.page - 1, last))}>; rel="prev"')
    if params.page < total_pages:
        links.append(f'<{url(params.page + 1)}>; rel="next"')
    links.append(f'<{url(last)}>; rel="last"')
    return ", ".join(links)
