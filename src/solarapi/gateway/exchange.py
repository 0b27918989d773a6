"""One request on its way through the gateway."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from starlette.datastructures import Headers
from starlette.types import Message, Scope, Send

from solarapi.gateway.request_id import request_id
from solarapi.kit import clientip
from solarapi.kit.version import API_VERSION
from solarapi.ratelimit.policy import anonymous_windows, rate_limit_headers

_API_VERSION = API_VERSION.encode()


@dataclasses.dataclass(slots=True)
class Exchange:
    """One request on its way through the gateway: what it adds to the response and what
    its log line reports."""

    scope: Scope
    state: Any  # the app's State
    downstream: Send
    method: str  # as the client sent it: a HEAD runs the app as GET
    request_id: str
    client_ip: str
    started: float
    # Added to the response's head: request id, API version, the rate-limit windows.
    extra: list[tuple[bytes, bytes]]
    # Every Authorization header's value, in order (read once, with the request id, in one
    # pass over the raw headers: the checks ask for it three times).
    authorization: list[str]
    # The first of them (`Headers.get`'s answer), or None.
    authorization_header: str | None
    route: str = "-"
    status: int = 500
    response_started: bool = False
    # The request's headers as `Headers`, made when first asked for (`headers`): only a
    # request with a body needs them (a GET's checks read the raw list once, in `begin`).
    _headers: Headers | None = None

    @property
    def headers(self) -> Headers:
        headers = self._headers
        if headers is None:
            headers = self._headers = Headers(scope=self.scope)
        return headers

    @classmethod
    def begin(cls, scope: Scope, send: Send) -> Exchange:
        started = time.perf_counter()
        state = scope["app"].state
        authorization: list[str] = []
        incoming: str | None = None
        # As `Headers.get`/`getlist` compare names: as the server gives them (lower case).
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization.append(value.decode("latin-1"))
            elif name == b"x-request-id" and incoming is None:
                incoming = value.decode("latin-1")
        rid = request_id(incoming)
        scope.setdefault("state", {})["request_id"] = rid
        # By position: a class called with keywords first packs them into a dict (~1,000
        # instructions; every request makes one exchange). In the fields' order: scope,
        # state, downstream, method, request_id, client_ip, started, extra, authorization,
        # authorization_header.
        return cls(
            scope,
            state,
            send,
            scope["method"],
            rid,
            clientip.client_ip(scope, state.settings.trusted_networks),
            started,
            [(b"x-request-id", rid.encode()), (b"api-version", _API_VERSION)],
            authorization,
            authorization[0] if authorization else None,
        )

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.response_started = True
            self.status = message["status"]
            message["headers"] = [*message.get("headers", []), *self.extra]
        elif message["type"] == "http.response.body" and self.method == "HEAD":
            # A HEAD response never has a body; the app ran GET (FastAPI's routes do not
            # answer HEAD themselves), its body is dropped here.
            message = {**message, "body": b""}
        await self.downstream(message)

    async def peek_anonymous(self) -> None:
        """The client IP's window, for its headers only (dashboard pages, and errors raised
        before any window was consulted)."""
        state = self.state
        decision = await state.limiter.peek(
            f"ip:{self.client_ip}", anonymous_windows(state.settings), state.clock()
        )
        self.extra.extend(rate_limit_headers(decision))
