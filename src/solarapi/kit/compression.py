"""Starlette's GZip layer with a cheaper way through for a client that does not take gzip.

`Compression` is `GZipMiddleware`: a client whose `Accept-Encoding` names gzip goes through
Starlette's own `GZipResponder`, unchanged. Every other request (wrk, most API clients and
every fleet poller that does not ask for gzip) went through Starlette's `IdentityResponder`,
which compresses nothing but still parses the request's headers into a `Headers`, the
response's head into another and a `MutableHeaders`, builds a set of media types and wraps
`send` in a bound coroutine method: measured in bench/fleet/README.md. `_Identity` gives the
same answer — the same messages, the same headers in the same order: `Vary: Accept-Encoding`
added (or appended to the response's own `Vary`, in its place) to a response whose body is
`minimum_size` bytes or more, not on a 206, a response with its own `Content-Encoding` or an
excluded media type — reading the raw header lists once.
"""

from __future__ import annotations

from starlette.middleware.gzip import GZipMiddleware
from starlette.types import Message, Receive, Scope, Send

_ACCEPT_ENCODING = b"accept-encoding"
_VARY = b"vary"
_VARY_VALUE = "Accept-Encoding"


class Compression(GZipMiddleware):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            accepted = ""
            for name, value in scope["headers"]:
                if name == _ACCEPT_ENCODING:
                    accepted = value.decode("latin-1")
                    break
            if "gzip" not in accepted:
                identity = _Identity(send, self.minimum_size, self.exclude_content_types)
                await self.app(scope, receive, identity.send)
                return
        await super().__call__(scope, receive, send)


class _Identity:
    """Starlette's `IdentityResponder.send_with_compression`, on the raw header list."""

    __slots__ = ("_excluded", "_minimum", "_send", "_start", "_state")

    # _state: "head" until the response's head is seen; "pass" once everything goes through
    # as it is; "first" while the head waits for the first body message.
    def __init__(self, send: Send, minimum_size: int, excluded: tuple[str, ...]) -> None:
        self._send = send
        self._minimum = minimum_size
        self._excluded = excluded
        self._start: Message = {}
        self._state = "head"

    async def send(self, message: Message) -> None:
        kind = message["type"]
        state = self._state
        if kind == "http.response.start" and state == "head":
            headers = message.setdefault("headers", [])
            encoded = False
            media_type = ""
            seen_type = False
            # Names as Starlette's `Headers` compares them: as given (lower case by ASGI).
            for name, value in headers:
                if name == b"content-encoding":
                    encoded = True
                elif name == b"content-type" and not seen_type:
                    seen_type = True
                    media_type = value.decode("latin-1").partition(";")[0].strip().lower()
            media_types = {media_type, media_type.partition("/")[0] + "/*"}
            if media_type.startswith("application/grpc+"):
                media_types.add("application/grpc")
            if encoded or message["status"] == 206 or not media_types.isdisjoint(self._excluded):
                self._state = "pass"
                await self._send(message)
                return
            self._start = message
            self._state = "first"
            return
        if state == "first" and kind == "http.response.body":
            self._state = "pass"
            start = self._start
            if len(message.get("body", b"")) >= self._minimum or message.get("more_body", False):
                _add_vary(start["headers"])
            await self._send(start)
            await self._send(message)
            return
        if state == "first" and kind == "http.response.pathsend":
            self._state = "pass"
            await self._send(self._start)
        await self._send(message)


def _add_vary(headers: list[tuple[bytes, bytes]]) -> None:
    """`MutableHeaders.add_vary_header("Accept-Encoding")` on a raw header list: the values
    of every `Vary` joined with it into one `Vary`, in the first one's place (the end when
    there is none)."""
    found = [i for i, (name, _) in enumerate(headers) if name == _VARY]
    values = [headers[i][1].decode("latin-1") for i in found]
    value = ", ".join([*values, _VARY_VALUE]).encode("latin-1")
    if not found:
        headers.append((_VARY, value))
        return
    headers[found[0]] = (_VARY, value)
    for i in reversed(found[1:]):
        del headers[i]
