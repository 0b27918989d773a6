"""Body policing: the size limit (up front and while a chunked body streams), JSON only, one
rule for a byte order mark, no duplicate object keys, and no NUL character in a JSON body."""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope

from solarapi.errors import ApiError, PayloadTooLarge, UnsupportedMediaType, ValidationFailed
from solarapi.kit.text import NUL_MESSAGE, JsonNulScanner, excerpt

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_BOM = b"\xef\xbb\xbf"
# Bodies up to this size are checked for duplicate keys here, by a second decoding (a
# fraction of a millisecond at this size); larger ones only go to endpoints that decode them
# in a way of their own and check there (the readings upload).
DUPLICATE_CHECK_BYTES = 256 * 1024


class _DuplicateKey(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return found


def duplicate_key(body: bytes) -> str | None:
    """The first object key given twice in a JSON text (None: none, or not valid JSON: the
    endpoint says what is wrong with it)."""
    try:
        json.loads(body, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        # Not valid JSON, or nested deeper than this decoder recurses (which the endpoint's
        # own decoder refuses as invalid JSON): the endpoint says what is wrong with it.
        return None
    return None


def duplicate_key_message(key: str) -> str:
    return f"the key '{excerpt(key)}' is given twice in one object; give each key once"


def check_body(
    scope: Scope, headers: Headers, receive: Receive, max_bytes: int
) -> tuple[ApiError | None, Receive]:
    """The error of a body refused by its headers (413, 415), or None and the `receive` the
    endpoint reads the body through, which refuses it while it streams (413, 400: raised as
    the `ApiError`s they are, which reach the app's handlers through FastAPI's body reading
    because `ApiError` is an HTTPException)."""
    if scope["method"] not in BODY_METHODS:
        return None, receive
    length_header = headers.get("content-length")
    # Any Transfer-Encoding means a body ("gzip, chunked" too, not only "chunked").
    encoded = bool(headers.get("transfer-encoding", "").strip())
    length = int(length_header) if length_header and length_header.isdigit() else 0
    if length > max_bytes:
        # Closed after the answer: the server would otherwise read the whole body to
        # discard it, to keep the connection.
        refused = PayloadTooLarge(
            f"Request body exceeds the limit of {max_bytes} bytes", headers={"Connection": "close"}
        )
        return refused, receive
    if length or encoded:
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
    kept: list[bytes] = []
    start = b""

    async def limited_receive() -> Message:
        # A chunked body has no Content-Length to check up front: count as it streams.
        nonlocal received, start
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            if len(start) < len(_BOM):
                start += chunk[: len(_BOM) - len(start)]
                if start.startswith(_BOM):
                    raise ValidationFailed(
                        "request body: starts with a byte order mark (BOM); send UTF-8 without one"
                    )
            received += len(chunk)
            if received > max_bytes:
                # The rest is not read: the server closes the connection after the answer.
                raise PayloadTooLarge(
                    f"Request body exceeds the limit of {max_bytes} bytes",
                    headers={"Connection": "close"},
                )
            if nul_scanner.feed(chunk):
                raise ValidationFailed(f"request body: {NUL_MESSAGE}")
            if received <= DUPLICATE_CHECK_BYTES:
                kept.append(chunk)
            else:
                kept.clear()
            if not message.get("more_body", False):
                _check_whole(b"".join(kept) if received <= DUPLICATE_CHECK_BYTES else None)
        return message

    def _check_whole(body: bytes | None) -> None:
        if body is not None and (key := duplicate_key(body)) is not None:
            raise ValidationFailed(f"request body: {duplicate_key_message(key)}")

    return None, limited_receive
