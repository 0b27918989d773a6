"""The gateway's hand-written fast paths against the library code they stand in for: each must
give what the library gives, only cheaper (bench/fleet/README.md has the counts)."""

from __future__ import annotations

import itertools
import time
from typing import Any
from urllib.parse import parse_qsl

import pytest
from fastapi import FastAPI
from starlette.datastructures import State
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import Message, Receive, Scope, Send
from ulid import ULID

from solarapi.app import AppState
from solarapi.gateway.query import _pairs
from solarapi.gateway.request_id import new_request_id
from solarapi.kit.compression import Compression


def test_query_pairs_equal_parse_qsl_on_every_short_string() -> None:
    # Every string of up to five characters over an alphabet holding each separator and
    # escape: the hand split where nothing is escaped, parse_qsl where something is.
    alphabet = "a=&%+;2"
    for size in range(6):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            assert _pairs(text) == parse_qsl(text, keep_blank_values=True), repr(text)


def test_request_id_is_a_ulid_of_now() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_request_id() for _ in range(2_000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for rid in ids:
        assert rid.startswith("req_")
        ulid = ULID.from_str(rid.removeprefix("req_"))  # refuses a malformed one
        assert str(ulid) == rid.removeprefix("req_")
        assert before <= ulid.milliseconds <= after


def _app(messages: list[Message]) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for message in messages:
            # Each middleware may change the message in place: a copy of its own each time.
            await send(
                {
                    **message,
                    **({"headers": list(message["headers"])} if "headers" in message else {}),
                }
            )

    return app


def _start(status: int = 200, *headers: tuple[bytes, bytes]) -> Message:
    return {"type": "http.response.start", "status": status, "headers": list(headers)}


def _body(size: int, *, more: bool = False) -> Message:
    return {"type": "http.response.body", "body": b"x" * size, "more_body": more}


JSON = (b"content-type", b"application/json")
RESPONSES = {
    "large JSON": [_start(200, JSON, (b"content-length", b"2000")), _body(2000)],
    "small JSON": [_start(200, JSON), _body(10)],
    "exactly the minimum": [_start(200, JSON), _body(1000)],
    "with its own Vary": [_start(200, (b"vary", b"Origin"), JSON), _body(2000)],
    "Vary after the type": [_start(200, JSON, (b"vary", b"Cookie")), _body(2000)],
    "two Vary": [_start(200, (b"vary", b"Origin"), JSON, (b"vary", b"Cookie")), _body(2000)],
    "already encoded": [_start(200, JSON, (b"content-encoding", b"br")), _body(2000)],
    "partial": [_start(206, JSON), _body(2000)],
    "excluded type": [_start(200, (b"content-type", b"text/event-stream")), _body(2000)],
    "type with parameters": [
        _start(200, (b"content-type", b"Text/CSV; charset=utf-8")),
        _body(2000),
    ],
    "no type": [_start(200), _body(2000)],
    "streamed": [_start(200, JSON), _body(10, more=True), _body(10, more=True), _body(0)],
    "no body message field": [_start(204), {"type": "http.response.body"}],
    "pathsend": [_start(200, JSON), {"type": "http.response.pathsend", "path": "/tmp/x"}],
    "early hint first": [
        {"type": "http.response.early_hint", "links": ["</a.css>; rel=preload"]},
        _start(200, JSON),
        _body(2000),
    ],
}


async def _sent(middleware: Any, request_headers: list[tuple[bytes, bytes]]) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": "GET", "path": "/", "headers": request_headers}
    await middleware(scope, receive, send)
    return sent


@pytest.mark.parametrize("name", sorted(RESPONSES))
@pytest.mark.parametrize(
    "accept", [[], [(b"accept-encoding", b"br, deflate")], [(b"accept-encoding", b"gzip")]]
)
async def test_compression_sends_what_starlettes_gzip_sends(
    name: str, accept: list[tuple[bytes, bytes]]
) -> None:
    # The service's settings (app.py): the same messages, headers in the same order, for a
    # client that takes gzip (Starlette's own responder) and for one that does not (ours).
    messages = RESPONSES[name]
    ours = Compression(_app(messages), minimum_size=1000, compresslevel=4)
    theirs = GZipMiddleware(_app(messages), minimum_size=1000, compresslevel=4)
    assert await _sent(ours, accept) == await _sent(theirs, accept)


def test_app_state_answers_as_starlettes_state(app: FastAPI) -> None:
    # The same operations on both: what each answers, and what each refuses, alike.
    def run(state: State) -> list[Any]:
        seen: list[Any] = []
        state.limiter = "memory"
        state["clock"] = 1.5
        seen += [state.limiter, state["limiter"], state.clock, hasattr(state, "engine")]
        state.limiter = "redis"
        seen.append(state.limiter)
        del state.limiter
        del state["clock"]
        seen += [hasattr(state, "limiter"), getattr(state, "clock", None)]
        try:
            state.engine  # noqa: B018
        except AttributeError as exc:
            seen.append(str(exc).replace("AppState", "State"))
        try:
            state["engine"]
        except KeyError as exc:
            seen.append(str(exc))
        try:
            del state.engine
        except (AttributeError, KeyError) as exc:
            seen.append(type(exc) in (AttributeError, KeyError))
        return seen

    assert run(AppState()) == run(State())
    assert isinstance(app.state, AppState)
    assert vars(app.state)["settings"] is app.state.settings  # a plain attribute
