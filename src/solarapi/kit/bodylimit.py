"""The largest request body an endpoint takes, declared beside it.

`@body_limit(n)` on an endpoint function: the gateway refuses a larger body (413) before the
endpoint runs — by its `Content-Length`, or as a chunked body streams — so no endpoint parses
more than it can need (a 9.7 MB body of 3.4 M empty items to `POST /systems` froze a worker
for seconds while it was parsed). An endpoint without one takes up to the server's
`SOLARAPI_MAX_BODY_BYTES`; a declared limit above that setting is cut to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

_MARK = "__solarapi_body_limit__"
KIB = 1024
# What a small JSON object (a system, a webhook, a report request) can need, many times over
# (its text fields at their longest are a few kB; a 65 kB name is still refused with a 400
# that names the field, not a 413).
SMALL_BODY = 256 * KIB
# An upload of up to 10,000 quarter-hours (readings, irradiance): ~1.1 MB as compact JSON,
# ~1.5 MB pretty-printed with long timestamps.
UPLOAD_BODY = 2 * 1024 * KIB

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def body_limit(limit: int) -> Callable[[F], F]:
    def mark(endpoint: F) -> F:
        setattr(endpoint, _MARK, limit)
        return endpoint

    return mark


def declared_body_limit(endpoint: Callable[..., Any]) -> int | None:
    limit = getattr(endpoint, _MARK, None)
    return limit if isinstance(limit, int) else None
