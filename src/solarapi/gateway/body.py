"""Body policing: the size limit (up front and while a chunked body streams), JSON only, and
no NUL character in a JSON body."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope

from solarapi.errors import ApiError, PayloadTooLarge, UnsupportedMediaType
from solarapi.kit.text import NUL_MESSAGE, JsonNulScanner, excerpt

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _BodyTooLarge(HTTPException):
    # An HTTPException: raised while the app reads the body, it reaches the app's handlers
    # (FastAPI re-raises HTTPExceptions from body reading).
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body exceeds the limit of {limit} bytes")


class _NulInBody(HTTPException):
    # An HTTPException, like _BodyTooLarge, for the same reason.
    def __init__(self) -> None:
        super().__init__(400, f"request body: {NUL_MESSAGE}")


def check_body(
    scope: Scope, headers: Headers, receive: Receive, max_bytes: int
) -> tuple[ApiError | None, Receive]:
    """The error of a body refused by its headers (413, 415), or None and the `receive` the
    endpoint reads the body through, which refuses it while it streams (413, 400)."""
    if scope["method"] not in _BODY_METHODS:
        return None, receive
    length_header = headers.get("content-length")
    chunked = headers.get("transfer-encoding", "").lower() == "chunked"
    length = int(length_header) if length_header and length_header.isdigit() else 0
    if length > max_bytes:
        return PayloadTooLarge(f"Request body exceeds the limit of {max_bytes} bytes"), receive
    if length or chunked:
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            return (
                UnsupportedMediaType(
                    f"Request bodies must be JSON (Content-Type: application/json); "
                    f"got '{excerpt(content_type or 'none')}'"
                ),
                receive,
            )
    received = 0
    nul_scanner = JsonNulScanner()

    async def limited_receive() -> Message:
        # A chunked body has no Content-Length to check up front: count as it streams.
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > max_bytes:
                raise _BodyTooLarge(max_bytes)
            if nul_scanner.feed(chunk):
                raise _NulInBody
        return message

    return None, limited_receive
