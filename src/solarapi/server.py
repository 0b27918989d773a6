"""The HTTP server of `solarapi serve`: uvicorn's httptools protocol with bounded request heads,
answers in the API's error shape, and a connection cap that keeps long keep-alive workable.

What uvicorn's own protocol does not do, and this one does:

- **Bounded heads.** llhttp (inside httptools) sets no limit on the request line or the headers:
  a 30 MB header was buffered and accepted. Here the URL is refused over `max_url_bytes` as it
  streams in, the headers over `max_header_bytes` in total, and an unfinished head is cut off
  once its raw bytes pass both limits together (httptools hands a header over only when it is
  complete, so a single endless header is bounded by counting what arrives).
- **The error shape.** Requests the server refuses before the app runs (an invalid or
  oversized head, a connection over the cap) are answered `{"error", "code"}` JSON like every
  other error, not uvicorn's plain text.
- **Keep-alive under a cap.** Idle connections stay open `keep_alive_seconds` (long enough for
  client pools, ≥ 60 s: a short server timeout races the client's reuse and the request is
  reset). Their number is bounded by `max_connections` per process: a new connection over the
  cap first closes the connection idle longest; only when none is idle is its request answered
  503 `unavailable` with `Retry-After`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from solarapi.config import Settings
from solarapi.kit.version import API_VERSION

# What each header line costs beyond its name and value: ": " and CRLF.
_HEADER_LINE_OVERHEAD = 4
_RETRY_AFTER_S = 1


@dataclass(frozen=True, slots=True)
class HeadLimits:
    max_url_bytes: int
    max_header_bytes: int


@functools.cache
def head_limits() -> HeadLimits:
    # Read in each worker process from the same environment the app's own Settings come from
    # (uvicorn builds the protocol by class in every worker, so it cannot be handed values).
    settings = Settings()
    return HeadLimits(settings.max_url_bytes, settings.max_header_bytes)


class _HeadRefused(Exception):
    """Raised from a parser callback: httptools turns it into an HttpParserError."""


def _json_error(status: int, code: str, message: str) -> bytes:
    return orjson.dumps({"error": message, "code": code})


async def _over_capacity(scope: Scope, receive: Receive, send: Send) -> None:
    body = _json_error(
        503, "unavailable", "The server is at its connection limit; try again shortly."
    )
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(_RETRY_AFTER_S).encode()),
                (b"api-version", API_VERSION.encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = head_limits()
        self._max_url = limits.max_url_bytes
        self._max_headers = limits.max_header_bytes
        # The cap is enforced here (idle connections are closed first, the 503 is JSON), so
        # uvicorn's own check, which answers in plain text, is switched off.
        self._max_connections: int | None = self.limit_concurrency
        self.limit_concurrency = None
        self._refusal: str | None = None
        self._in_head = False
        self._head_began_in_this_read = False
        self._raw_head_bytes = 0
        self._header_bytes = 0
        self._idle_since: float | None = None

    # --- connections -------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        # Idle until its first request arrives, and closed like any idle connection if none
        # does (uvicorn arms the keep-alive timer only after a response).
        self._idle_since = time.monotonic()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        if self._max_connections is not None and len(self.connections) > self._max_connections:
            self._close_longest_idle()

    def _open_connections(self) -> int:
        # Connections closed to make room may not have been dropped from the set yet.
        if self._max_connections is None or len(self.connections) <= self._max_connections:
            return len(self.connections)
        return sum(
            1
            for other in self.connections
            if not (isinstance(other, HttpToolsProtocol) and other.transport.is_closing())
        )

    def _close_longest_idle(self) -> None:
        idle = [
            other
            for other in self.connections
            if isinstance(other, BoundedHttpToolsProtocol)
            and other is not self
            and other._idle_since is not None
        ]
        if idle:
            oldest = min(idle, key=lambda other: other._idle_since or 0.0)
            oldest.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:
            self._idle_since = time.monotonic()

    # --- the request head --------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._idle_since = None
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        # A head still incomplete after this read. The read in which it began is not
        # counted: it may also hold the end of the previous request's body.
        if self._head_began_in_this_read:
            self._head_began_in_this_read = False
        else:
            self._raw_head_bytes += len(data)
        if self._raw_head_bytes > self._max_url + self._max_headers:
            self._refusal = (
                f"The request headers are larger than the limit of {self._max_headers} bytes"
            )
            self.send_400_response("")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_began_in_this_read = True
        self._raw_head_bytes = 0
        self._header_bytes = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self._max_url:
            self._refusal = f"The URL is longer than the limit of {self._max_url} bytes"
            raise _HeadRefused

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + _HEADER_LINE_OVERHEAD
        if self._header_bytes > self._max_headers:
            self._refusal = (
                f"The request headers are larger than the limit of {self._max_headers} bytes"
            )
            raise _HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        limit = self._max_connections
        if limit is None or (self._open_connections() <= limit and len(self.tasks) < limit):
            super().on_headers_complete()
            return
        self.logger.warning("connection limit of %d reached: answering 503", limit)
        app, self.app = self.app, _over_capacity
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a head it cannot take, in the API's error shape."""
        message = self._refusal or "The request is not valid HTTP/1.1"
        body = _json_error(400, "validation", message)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"api-version: " + API_VERSION.encode() + b"\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
