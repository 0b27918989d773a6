"""The HTTP server of `solarapi serve`: uvicorn's httptools protocol with bounded request heads,
timed reads, answers in the API's error shape, and connection caps that keep long keep-alive
workable and a slow client from holding the server.

What uvicorn's own protocol does not do, and this one does:

- **Bounded heads.** llhttp (inside httptools) sets no limit on the request line or the headers:
  a 30 MB header was buffered and accepted. Here the URL is refused over `max_url_bytes` as it
  streams in, the headers over `max_header_bytes` in total, and an unfinished head is cut off
  once its raw bytes pass both limits together (httptools hands a header over only when it is
  complete, so a single endless header is bounded by counting what arrives).
- **Timed reads (slowloris).** uvicorn cancels its keep-alive timer at a request's first byte
  and arms nothing else, so a head sent in part and then left, or a body that stops, held its
  connection for ever. Here a head must be complete `header_timeout_seconds` after its first
  byte, and a body must arrive at `body_min_rate` bytes per second or more, measured over
  each `body_rate_window_seconds` in which the server was waiting for it (time in which the
  app had not read what it already had does not count). Either is answered `408` and closed.
- **The error shape.** Requests the server refuses before the app runs (an invalid or
  oversized head, a slow one, a connection over a cap) are answered `{"error", "code"}` JSON
  like every other error, not uvicorn's plain text.
- **Keep-alive under caps.** Idle connections stay open `keep_alive_seconds` (long enough for
  client pools, ≥ 60 s: a short server timeout races the client's reuse and the request is
  reset). Their number is bounded by `max_connections` per process: a new connection over the
  cap first closes the connection quiet longest — an idle one, a head still arriving a second
  after its first byte, or a body that has stalled (nothing for a second while the server
  waits for it); only when there is none is
  its request answered 503 `unavailable` with `Retry-After`. One client address may hold
  `max_connections_per_ip` connections (trusted proxies are exempt): over it, its own
  quietest connection makes room, else the new one is answered 429 and closed.
- **Shutdown.** On SIGTERM a request whose body has stalled is answered 503 with
  `Retry-After` and `Connection: close` (it would otherwise hold the exit for the 20 s grace
  and end in a plain-text 500); a request the grace period cancels before its response
  started is answered the same.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from solarapi.config import Settings
from solarapi.kit.version import API_VERSION

if TYPE_CHECKING:
    from solarapi.errors import ErrorCode

# What each header line costs beyond its name and value: ": " and CRLF.
_HEADER_LINE_OVERHEAD = 4
_RETRY_AFTER_S = 1
# A head or body with nothing new for this long, while the server waits for it, has stalled:
# its connection may be closed to make room, and on shutdown it is answered 503.
STALLED_S = 1.0

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class TransportLimits:
    max_url_bytes: int
    max_header_bytes: int
    header_timeout_s: float
    body_min_rate: int
    body_window_s: float
    max_per_ip: int
    trusted: tuple[Network, ...]


@functools.cache
def transport_limits() -> TransportLimits:
    # Read in each worker process from the same environment the app's own Settings come from
    # (uvicorn builds the protocol by class in every worker, so it cannot be handed values).
    settings = Settings()
    return TransportLimits(
        max_url_bytes=settings.max_url_bytes,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_seconds,
        body_min_rate=settings.body_min_rate,
        body_window_s=settings.body_rate_window_seconds,
        max_per_ip=settings.max_connections_per_ip,
        trusted=tuple(settings.trusted_networks),
    )


# Open connections per client address in this process (one event loop: no lock needed).
_per_ip: Counter[str] = Counter()


class _HeadRefused(Exception):
    """Raised from a parser callback: httptools turns it into an HttpParserError."""


def _json_error(code: str, message: str) -> bytes:
    return orjson.dumps({"error": message, "code": code})


def _error_message(status: int, code: str, message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = _json_error(code, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"api-version", API_VERSION.encode()),
        (b"connection", b"close"),
    ]
    if status in (429, 503):
        headers.append((b"retry-after", str(_RETRY_AFTER_S).encode()))
    return headers, body


def _answer(status: int, code: str, message: str) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers, body = _error_message(status, code, message)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return app


_over_capacity = _answer(
    503, "unavailable", "The server is at its connection limit; try again shortly."
)
_SHUTTING_DOWN = "The server is restarting; retry the request on a new connection."


def _answer_on_cancel(app: ASGIApp) -> ASGIApp:
    """`app`, answering 503 JSON instead of uvicorn's plain-text 500 when the server cancels a
    request (its graceful shutdown ran out) before the response started."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        # Whether the response started is uvicorn's own record, on the request's cycle
        # (`send` is its bound method): no wrapper around every message of every response
        # (a coroutine per message, measured in bench/fleet/README.md). A `send` of another
        # server is wrapped to keep that record here.
        cycle: Any = getattr(send, "__self__", None)
        if isinstance(cycle, RequestResponseCycle):
            if not cycle.access_log:
                send = OneWrite(cycle)
        elif not isinstance(getattr(cycle, "response_started", None), bool):
            cycle = _StartTracker(send)
            send = cycle.send
        try:
            await app(scope, receive, send)
        except asyncio.CancelledError:
            if cycle.response_started or scope["type"] != "http":
                raise
            # The task ends here either way; its client gets an answer it can retry.
            await _answer(503, "unavailable", _SHUTTING_DOWN)(scope, receive, send)

    return guarded


class _StartTracker:
    """Whether a response started, for a `send` that does not say so itself."""

    __slots__ = ("_send", "response_started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.response_started = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.response_started = True
        await self._send(message)


# Bodies up to this size are written with their head in one `transport.write` (a copy of
# the body); a larger one is written after it, as uvicorn writes every body.
ONE_WRITE_MAX = 256 * 1024


class OneWrite:
    """uvicorn's `RequestResponseCycle.send` for one request, writing a response of known
    length's head with its body in one `transport.write` (one system call per response, not
    two), and checking the headers' characters with two regular-expression searches, not two
    per header (30 per API response: ~40 k instructions; bench/fleet/README.md).

    The head is built at `http.response.start` exactly as uvicorn builds it — the same
    checks, raised there with the same errors, the same state on the cycle. When it carries
    a `Content-Length` (and the request is not a HEAD) only its write waits for the first
    body message, which follows at once (`Response` sends both in one step); a streamed
    (chunked) response's head, and a HEAD's, is written at once, as uvicorn writes it. Every
    message but those two is the cycle's own `send`, after the held head has been written
    (but to a client that is gone). One difference: an app that ends, or is cancelled,
    between such a head and its body has its connection closed by uvicorn either way, now
    without the head. Compared with uvicorn's own `send` in tests/gateway/test_fast_paths.py.
    """

    __slots__ = ("_cycle", "_head")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        self._head: bytes | None = None

    async def __call__(self, message: Message) -> None:
        cycle = self._cycle
        head = self._head
        if head is None:
            if (
                message["type"] != "http.response.start"
                or cycle.response_started
                or cycle.disconnected
                or cycle.flow.write_paused
            ):
                await cycle.send(message)  # type: ignore[arg-type]
                return
            head = _head_of(cycle, message)
            if cycle.chunked_encoding is False and cycle.scope["method"] != "HEAD":
                self._head = head
            else:
                cycle.transport.write(head)
            return
        self._head = None
        if cycle.disconnected:  # the client is gone: uvicorn writes nothing more
            await cycle.send(message)  # type: ignore[arg-type]
            return
        if message["type"] != "http.response.body" or cycle.flow.write_paused:
            cycle.transport.write(head)
            await cycle.send(message)  # type: ignore[arg-type]
            return
        body = message.get("body", b"")
        more_body = message.get("more_body", False)
        transport = cycle.transport
        size = len(body)
        if size > cycle.expected_content_length:
            transport.write(head)
            raise RuntimeError("Response content longer than Content-Length")
        cycle.expected_content_length -= size
        if size <= ONE_WRITE_MAX:
            transport.write(head + body)
        else:
            transport.write(head)
            transport.write(body)
        if not more_body:
            if cycle.expected_content_length != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            cycle.response_complete = True
            cycle.message_event.set()
            if not cycle.keep_alive:
                transport.close()
            cycle.on_response()


# A character uvicorn refuses in a header name, or an upper-case letter: names joined without
# one are each valid and already lower case (as every response of this app's names are).
_NAME_NOT_PLAIN = re.compile(HEADER_RE.pattern + b"|[A-Z]")


def passed_bytes(pattern: re.Pattern[bytes]) -> bytes:
    """Every byte a pattern of one character (a class, or classes joined by `|`) does not
    match: `text.translate(None, passed_bytes(pattern))` is empty exactly when
    `pattern.search(text)` finds nothing. A table look-up per byte in one C loop, where the
    search ran the expression engine at every position (~35 k instructions per response,
    ~6 % of a kept readings request: callgrind, bench/fleet/README.md)."""
    return bytes(b for b in range(256) if pattern.fullmatch(bytes((b,))) is None)


_PLAIN_NAME_BYTES = passed_bytes(_NAME_NOT_PLAIN)
_VALUE_BYTES = passed_bytes(HEADER_VALUE_RE)


def _valid_values(headers: list[tuple[bytes, bytes]]) -> list[bytes] | None:
    """The headers' values when every one is valid, else None."""
    try:
        value_list = [value for _, value in headers]
        values = b"".join(value_list)
    except TypeError:  # not bytes: the search header by header raises what uvicorn's raises
        return None
    # `not HEADER_VALUE_RE.search(values)`
    return None if values.translate(None, _VALUE_BYTES) else value_list


def _head_of(cycle: RequestResponseCycle, message: Message) -> bytes:
    """The response's head, and the cycle's state after it, as uvicorn's `send` makes them
    for `http.response.start` (without an access log)."""
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    status_code = message["status"]
    headers = cycle.default_headers + list(message.get("headers", []))
    content = [STATUS_LINE[status_code]]
    has_connection_close = False
    # A character refused in a name (or a value) is refused wherever it stands: one search
    # over them all answers for each, and only a refusal searches again, header by header,
    # to raise what uvicorn raises, where it raises it.
    try:
        name_list = [name for name, _ in headers]
        names: bytes | None = b"".join(name_list)
    except TypeError:  # not bytes: the search below raises what uvicorn's raises
        names = None
    value_list = (
        None
        if names is None or names.translate(None, _PLAIN_NAME_BYTES)  # `_NAME_NOT_PLAIN.search`
        else _valid_values(headers)
    )
    plain = value_list is not None
    if (
        value_list is not None
        and names is not None
        # (`find`, not `in`: see `kit.text.url_has_nul`)
        and names.find(b"transfer-encoding") < 0
        and names.find(b"connection") < 0
    ):
        # Every name valid and lower case, none a Transfer-Encoding or Connection: of
        # uvicorn's loop only the first Content-Length's state and the lines are left, made
        # here without a turn of Python per header (~15 headers per API response).
        if cycle.chunked_encoding is None and names.find(b"content-length") >= 0:
            # The first one's (found in C: a dict of the headers hashed every name).
            try:
                first = name_list.index(b"content-length")
            except ValueError:  # only in another name (`x-content-length`)
                first = -1
            if first >= 0:
                cycle.expected_content_length = int(value_list[first].decode())
                cycle.chunked_encoding = False
        # Each line's four pieces in place, joined with the head below: a %-format per line
        # parsed its format byte by byte (~1,100 instructions a header).
        count = len(headers)
        lines = [b": "] * (4 * count)
        lines[0::4] = name_list
        lines[2::4] = value_list
        lines[3::4] = [b"\r\n"] * count
        content += lines
    else:
        checked = plain or (
            names is not None and not HEADER_RE.search(names) and _valid_values(headers) is not None
        )
        for name, value in headers:
            if not checked:
                if HEADER_RE.search(name):
                    raise RuntimeError("Invalid HTTP header name.")
                if HEADER_VALUE_RE.search(value):
                    raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and cycle.chunked_encoding is None:
                cycle.expected_content_length = int(value.decode())
                cycle.chunked_encoding = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                cycle.expected_content_length = 0
                cycle.chunked_encoding = True
            elif name == b"connection":
                connection = [token.lower().strip() for token in value.split(b",")]
                if b"close" in connection:
                    cycle.keep_alive = False
                    has_connection_close = True
            content.extend([name, b": ", value, b"\r\n"])
    if not cycle.keep_alive and not has_connection_close:
        content.append(b"connection: close\r\n")
    if (
        cycle.chunked_encoding is None
        and cycle.scope["method"] != "HEAD"
        and status_code not in (204, 304)
    ):
        cycle.chunked_encoding = True
        content.append(b"transfer-encoding: chunked\r\n")
    content.append(b"\r\n")
    return b"".join(content)


Reading = Literal["head", "body"] | None


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = transport_limits()
        self._limits = limits
        self._max_url = limits.max_url_bytes
        self._max_headers = limits.max_header_bytes
        self.app = _answer_on_cancel(self.app)
        # The cap is enforced here (idle connections are closed first, the 503 is JSON), so
        # uvicorn's own check, which answers in plain text, is switched off.
        self._max_connections: int | None = self.limit_concurrency
        self.limit_concurrency = None
        self._refusal: str | None = None
        self._raw_head_bytes = 0
        self._head_began_in_this_read = False
        self._header_bytes = 0
        self._idle_since: float | None = None
        self._ip: str | None = None
        # What the server is reading: a head (since `_head_started`), a body, or nothing.
        self._reading: Reading = None
        self._head_started = 0.0
        self._last_data = 0.0
        self._window_started = 0.0
        self._window_bytes = 0
        self._body_left: int | None = None  # from Content-Length; None when chunked
        self._window_left: int | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        # A head or body began in this read: its watchdog is armed at the end of the read
        # (`_arm_after_read`), and not at all when the request was complete within it.
        self._arm_pending = False
        self._shutting_down = False

    # --- connections -------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        now = time.monotonic()
        # Idle until its first request arrives, and closed like any idle connection if none
        # does (uvicorn arms the keep-alive timer only after a response).
        self._idle_since = now
        self._last_data = now
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        if self.client is not None and not self._trusted(self.client[0]):
            self._ip = self.client[0]
            _per_ip[self._ip] += 1
            if _per_ip[self._ip] > self._limits.max_per_ip and not self._evict(self._ip):
                self.logger.warning(
                    "per-address connection limit of %d reached by %s: refusing",
                    self._limits.max_per_ip,
                    self._ip,
                )
                self._refuse(
                    429,
                    "rate_limit",
                    f"Too many open connections from one address (limit "
                    f"{self._limits.max_per_ip}); reuse or close connections",
                )
                return
        if self._max_connections is not None and len(self.connections) > self._max_connections:
            self._evict(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watchdog()
        if self._ip is not None:
            _per_ip[self._ip] -= 1
            if _per_ip[self._ip] <= 0:
                del _per_ip[self._ip]
            self._ip = None
        super().connection_lost(exc)

    def _trusted(self, host: str) -> bool:
        if not self._limits.trusted:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._limits.trusted)

    def _open_connections(self) -> int:
        # Connections closed to make room may not have been dropped from the set yet.
        if self._max_connections is None or len(self.connections) <= self._max_connections:
            return len(self.connections)
        return sum(
            1
            for other in self.connections
            if not (isinstance(other, HttpToolsProtocol) and other.transport.is_closing())
        )

    def _quiet_since(self, now: float) -> float | None:
        """Since when this connection has been evictable: idle, or stalled while the server
        waits for its head or body; None when it is busy (the app works on its request, or
        data is arriving)."""
        if self.transport is None or self.transport.is_closing():
            return None
        if self._reading is None:
            return self._idle_since
        if self._reading == "head":
            # A head arrives in one packet or a few, within milliseconds: one still arriving
            # after STALLED_S is being trickled (slowloris), however recent its last byte.
            return self._head_started if now - self._head_started >= STALLED_S else None
        if self.flow.read_paused:
            return None  # the server is not reading: the app has not taken what came
        return self._last_data if now - self._last_data >= STALLED_S else None

    def _evict(self, ip: str | None) -> bool:
        """Close the connection quiet longest (of client address `ip`, or of any): answered
        408 when its request was half sent. False when none is quiet."""
        now = time.monotonic()
        best: BoundedHttpToolsProtocol | None = None
        best_since = now
        for other in self.connections:
            if other is self or not isinstance(other, BoundedHttpToolsProtocol):
                continue
            if ip is not None and other._ip != ip:
                continue
            since = other._quiet_since(now)
            if since is not None and since <= best_since:
                best, best_since = other, since
        if best is None:
            return False
        if best._reading is None:
            best.transport.close()
        else:
            best._refuse(
                408,
                "request_timeout",
                "The request stalled and its connection was closed to serve another; "
                "send the whole request promptly",
            )
        return True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:
            self._idle_since = time.monotonic()

    def shutdown(self) -> None:
        self._shutting_down = True
        if self._reading == "body" and self.cycle is not None and not self.cycle.response_complete:
            # Let a body that is still arriving finish; one that has stalled is answered
            # 503 by the watchdog within STALLED_S.
            self.cycle.keep_alive = False
            self._arm(0.0)
            return
        super().shutdown()

    # --- the watchdog: head timeout, body rate ----------------------------------------------

    def _arm(self, delay: float) -> None:
        self._stop_watchdog()
        self._watchdog = self.loop.call_later(max(delay, 0.0), self._watch)

    def _arm_after_read(self) -> None:
        """The watchdog of a head or body that began in the read just parsed and is still
        arriving, due when it would have been had it been armed when it began. A request
        whose head (and body) came in one read — nearly every GET — arms none: it was armed
        and cancelled twice per request before (two timers, within the same read)."""
        self._arm_pending = False
        if self._watchdog is not None or self.transport.is_closing():
            return
        if self._reading == "head":
            due = self._head_started + self._limits.header_timeout_s
        elif self._reading == "body":
            due = self._window_started + self._limits.body_window_s
        else:
            return
        self._arm(due - time.monotonic())

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _watch(self) -> None:
        self._watchdog = None
        if self.transport is None or self.transport.is_closing():
            return
        now = time.monotonic()
        limits = self._limits
        if self._reading == "head":
            left = self._head_started + limits.header_timeout_s - now
            if left > 0:
                self._arm(left)
                return
            self._refuse(
                408,
                "request_timeout",
                f"The request head was not complete within {limits.header_timeout_s:g} s "
                f"of its first byte",
            )
            return
        if self._reading != "body":
            return
        if self._shutting_down:
            quiet = now - self._last_data
            if quiet >= STALLED_S and not self.flow.read_paused:
                self._refuse(503, "unavailable", _SHUTTING_DOWN)
                return
        if self.flow.read_paused:
            # The app has not read what arrived: the client is not the one waiting.
            self._start_window(now)
        elif now - self._window_started >= limits.body_window_s:
            needed = limits.body_min_rate * (now - self._window_started)
            if self._window_left is not None:
                needed = min(needed, self._window_left)
            if self._window_bytes < needed:
                self._refuse(
                    408,
                    "request_timeout",
                    f"The request body arrived slower than {limits.body_min_rate} bytes "
                    f"per second; send it at once",
                )
                return
            self._start_window(now)
        next_check = self._window_started + limits.body_window_s - now
        if self._shutting_down:
            next_check = min(next_check, STALLED_S / 4)
        self._arm(next_check)

    def _start_window(self, now: float) -> None:
        self._window_started = now
        self._window_bytes = 0
        self._window_left = self._body_left

    def _refuse(self, status: int, code: ErrorCode, message: str) -> None:
        """Answer `status` JSON (when no response has started) and close the connection; a
        request the app is running sees its client disconnect."""
        self._stop_watchdog()
        # While a head is read, `self.cycle` is the previous request's (or None).
        cycle = None if self._reading == "head" else self.cycle
        self._reading = None
        answered = cycle is not None and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        if not answered:
            self.logger.info("answering %d and closing: %s", status, message)
            headers, body = _error_message(status, code, message)
            self._write_raw(status, headers, body)
        self.transport.close()

    def _write_raw(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        content = [STATUS_LINE[status]]
        for name, value in [*self.server_state.default_headers, *headers]:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"\r\n", body])
        self.transport.write(b"".join(content))

    # --- the request head --------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._idle_since = None
        self._last_data = time.monotonic()
        super().data_received(data)
        if self._arm_pending:
            self._arm_after_read()
        if self._reading != "head" or self.transport.is_closing():
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
        self._reading = "head"
        # The parser calls back only from `data_received`, which has just read the clock.
        self._head_started = self._last_data
        self._head_began_in_this_read = True
        self._raw_head_bytes = 0
        self._header_bytes = 0
        if self._watchdog is not None:
            self._stop_watchdog()
        self._arm_pending = True

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
        self._reading = "body"
        self._body_left = None
        for name, value in self.headers:
            if name == b"content-length" and value.isdigit():
                self._body_left = int(value)
        self._start_window(self._last_data)  # the clock as `data_received` read it
        if self._watchdog is not None:
            self._stop_watchdog()
        self._arm_pending = True
        limit = self._max_connections
        if limit is None or (
            (len(self.connections) <= limit or self._open_connections() <= limit)
            and len(self.tasks) < limit
        ):
            super().on_headers_complete()
            return
        if self._evict(None):
            super().on_headers_complete()
            return
        self.logger.warning("connection limit of %d reached: answering 503", limit)
        app, self.app = self.app, _over_capacity
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def on_body(self, body: bytes) -> None:
        self._window_bytes += len(body)
        if self._body_left is not None:
            self._body_left -= len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._reading = None
        if self._watchdog is not None:
            self._stop_watchdog()
        super().on_message_complete()
        cycle = self.cycle
        if (
            cycle is not None
            and cycle.response_complete
            and not self.pipeline
            and self.timeout_keep_alive_task is None
            and not self.transport.is_closing()
        ):
            # The response went out before the body was read to its end (an early 401 or
            # 413): the connection is idle now, and closed like any idle one.
            self._idle_since = time.monotonic()
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a head it cannot take, in the API's error shape."""
        self._stop_watchdog()
        self._reading = None
        message = self._refusal or "The request is not valid HTTP/1.1"
        headers, body = _error_message(400, "validation", message)
        self._write_raw(400, headers, body)
        self.transport.close()
