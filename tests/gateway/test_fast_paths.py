"""The gateway's hand-written fast paths against the library code they stand in for: each must
give what the library gives, only cheaper (bench/fleet/README.md has the counts)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import re
import subprocess
import sys
import time
from typing import Any, cast
from urllib.parse import parse_qsl

import pytest
from fastapi import FastAPI
from starlette.datastructures import State
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send
from ulid import ULID
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    RequestResponseCycle,
)

from solarapi.app import AppState, SolarApi
from solarapi.gateway.query import _pairs
from solarapi.gateway.request_id import _RANDOM, new_request_id
from solarapi.gateway.routing import RouteMatch
from solarapi.kit.compression import Compression
from solarapi.kit.pagination import _kept_prefix, _link_prefix
from solarapi.server import _NAME_NOT_PLAIN, OneWrite, passed_bytes


def test_query_pairs_equal_parse_qsl_on_every_short_string() -> None:
    # Every string of up to five characters over an alphabet holding each separator and
    # escape: the hand split where nothing is escaped, parse_qsl where something is.
    alphabet = "a=&%+;2"
    for size in range(6):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            assert _pairs(text) == parse_qsl(text, keep_blank_values=True), repr(text)


def test_link_prefix_of_a_paging_query_equals_starlettes() -> None:
    # The Link header's prefix written from the path alone (a query of nothing but page and
    # limit) against the one built through Starlette's URL and QueryParams, over paths with
    # every character the path's escaping touches, and over queries of up to three fields
    # (the other parameters, escapes and separators take Starlette's way in both).
    paths = ["/api/v1/systems", "/api/v1/a?b", "/x#y", "/back\\slash", "/sp ace", "/é", "/%3F", "/"]
    fields = [
        "page=2",
        "limit=5",
        "page=",
        "page",
        "limit=10",
        "status=active",
        "page=%32",
        "a+b=1",
    ]
    queries = [""] + [
        "&".join(chosen) for n in (1, 2, 3) for chosen in itertools.permutations(fields, n)
    ]
    for path in paths:
        for query in queries:
            scope = {"type": "http", "path": path, "query_string": query.encode(), "headers": []}
            request = Request(scope)
            assert _link_prefix(request) == _kept_prefix(request), (path, query)


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


def test_request_id_writes_the_generators_bits() -> None:
    # The random part is the 80 bits the process's generator draws, written as ULIDs write
    # them: drawn again from the same state, they read back from the id.
    for _ in range(2_000):
        state = _RANDOM.getstate()
        rid = new_request_id()
        _RANDOM.setstate(state)
        bits = _RANDOM.getrandbits(80)
        assert ULID.from_str(rid.removeprefix("req_")).bytes[6:] == bits.to_bytes(10, "big")


def test_request_ids_differ_between_processes_and_ignore_the_random_modules_seed() -> None:
    """The ids' random bits come from a generator of the process's own, seeded again in a
    forked child: a parent and its child (a forked worker) never draw the same bits, and
    `random.seed` elsewhere in the process changes nothing of them."""
    state = random.getstate()
    try:
        random.seed(7)
        seeded = new_request_id()
        random.seed(7)
        assert new_request_id()[14:] != seeded[14:]  # the random part (after the time)
    finally:
        random.setstate(state)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.write(write, "".join(new_request_id()[14:] for _ in range(100)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    os.waitpid(child, 0)
    mine = "".join(new_request_id()[14:] for _ in range(100))
    assert len(theirs) == len(mine) == 1_600
    assert {theirs[k : k + 16] for k in range(0, 1_600, 16)}.isdisjoint(
        mine[k : k + 16] for k in range(0, 1_600, 16)
    )
    spawned = subprocess.run(
        [sys.executable, "-c", "from solarapi.gateway.request_id import new_request_id as n; "
         "print(''.join(n()[14:] for _ in range(100)))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert len(spawned) == 1_600
    assert {spawned[k : k + 16] for k in range(0, 1_600, 16)}.isdisjoint(
        mine[k : k + 16] for k in range(0, 1_600, 16)
    )


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


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class _Flow:
    write_paused = False


def _cycle(method: str, keep_alive: bool, responded: list[int]) -> RequestResponseCycle:
    scope: Any = {"type": "http", "method": method, "http_version": "1.1"}
    transport = _Transport()
    return RequestResponseCycle(
        scope=scope,
        transport=cast(Any, transport),
        flow=cast(Any, _Flow()),
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test.access"),
        access_log=False,
        default_headers=[(b"date", b"Fri, 27 Nov 2026 04:00:00 GMT")],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=keep_alive,
        on_response=lambda: responded.append(len(transport.writes)),
    )


_JSON = (b"content-type", b"application/json")
_RESPONSES: list[list[Message]] = [
    [
        _start(200, _JSON, (b"content-length", b"5")),
        {"type": "http.response.body", "body": b"hello"},
    ],
    [_start(200, (b"content-length", b"0")), {"type": "http.response.body"}],
    [
        _start(200, (b"Content-Length", b"6"), (b"x-ratelimit-limit", b"60")),
        {"type": "http.response.body", "body": b"abc", "more_body": True},
        {"type": "http.response.body", "body": b"def", "more_body": False},
    ],
    [_start(200, _JSON), _body(5, more=True), _body(0)],  # chunked
    [_start(200, (b"transfer-encoding", b"chunked")), _body(3), _body(0)],
    [_start(204), {"type": "http.response.body", "body": b""}],
    [_start(304, (b"etag", b'"x"')), {"type": "http.response.body"}],
    [_start(200, (b"content-length", b"4"), (b"connection", b"close")), _body(4)],
    [_start(200, (b"Connection", b"keep-alive, Close")), _body(2)],
    [_start(200, (b"content-length", b"3")), _body(5)],  # longer than declared
    [_start(200, (b"content-length", b"9")), _body(5)],  # shorter than declared
    [_start(200, (b"x-bad name", b"v"), (b"content-length", b"1")), _body(1)],
    [_start(200, (b"content-length", b"1"), (b"x-bad", b"a\r\nb")), _body(1)],
    [_start(200, (b"x", b"a\nb"), (b"y(", b"v")), _body(1)],  # the first refusal wins
    [_start(200, (b"x", cast(bytes, "text"))), _body(1)],  # not bytes
    [_start(200, (b"content-length", b"2")), {"type": "http.response.pathsend", "path": "/x"}],
    [_body(1)],  # a body before the head
    [_start(200, (b"content-length", b"1")), _body(1), _body(1)],  # after the end
    [_start(200, (b"content-length", b"1")), _start(200, (b"content-length", b"1"))],
    # The plain head's shortcut (every name valid and lower case, no Transfer-Encoding or
    # Connection): the first Content-Length of several is the one, names that only contain
    # a stateful one are not it, an API response's ~15 headers.
    [_start(200, (b"content-length", b"2"), (b"content-length", b"9")), _body(2)],
    [_start(200, (b"x-content-length", b"7"), (b"content-length", b"2")), _body(2)],
    [_start(200, (b"x-connection-id", b"close"), (b"content-length", b"1")), _body(1)],
    [_start(200, (b"x-transfer-encoding", b"chunked"), _JSON), _body(1, more=True), _body(0)],
    [_start(200, (b"content-length", b"x1")), _body(2)],  # not a number
    [_start(200, (b"x-a", cast(bytes, bytearray(b"v"))), (b"content-length", b"1")), _body(1)],
    [_start(200, (b"X-Upper", b"v"), (b"x", cast(bytes, "text"))), _body(1)],
    [_start(200, (b"x-up", b"v"), (b"X-bad name", b"v")), _body(1)],
    [
        _start(
            200,
            (b"content-length", b"4"),
            _JSON,
            (b"x-request-id", b"req_01KB0000000000000000000000"),
            (b"api-version", b"2025-01-01"),
            (b"x-ratelimit-limit", b"600"),
            (b"x-ratelimit-remaining", b"599"),
            (b"x-ratelimit-reset", b"1795000020"),
            (b"x-ratelimit-limit-minute", b"600"),
            (b"x-ratelimit-remaining-minute", b"599"),
            (b"ratelimit-policy", b'"minute";q=600;w=60'),
            (b"ratelimit", b'"minute";r=599;t=20'),
            (b"vary", b"Accept-Encoding"),
        ),
        _body(4),
    ],
]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("keep_alive", [True, False])
@pytest.mark.parametrize("messages", _RESPONSES)
async def test_one_write_sends_what_uvicorns_send_sends(
    messages: list[Message], method: str, keep_alive: bool
) -> None:
    async def run(one_write: bool) -> tuple[Any, ...]:
        # When the server is told the response is done (it arms the keep-alive timer then).
        responded: list[int] = []
        cycle = _cycle(method, keep_alive, responded)
        send: Any = OneWrite(cycle) if one_write else cycle.send
        error: tuple[type, str] | None = None
        try:
            for message in messages:
                await send({**message, "headers": list(message.get("headers", []))})
        except (RuntimeError, TypeError, ValueError) as exc:
            error = (type(exc), str(exc))
        transport = cast(_Transport, cycle.transport)
        state = (
            cycle.response_started,
            cycle.response_complete,
            cycle.keep_alive,
            cycle.chunked_encoding,
            cycle.expected_content_length,
            cycle.message_event.is_set(),
            bool(responded),
            responded and transport.writes[: responded[0]] == transport.writes,
        )
        return b"".join(transport.writes), transport.closed, error, state, len(transport.writes)

    *theirs, their_writes = await run(one_write=False)
    *ours, our_writes = await run(one_write=True)
    assert ours == theirs
    assert our_writes <= their_writes
    one_message = len(messages) == 2 and messages[1].get("type") == "http.response.body"
    if theirs[2] is None and one_message and method == "GET":
        lengths = [v for n, v in messages[0]["headers"] if n.lower() == b"content-length"]
        assert our_writes == (1 if lengths else their_writes)


@pytest.mark.parametrize("pattern", [_NAME_NOT_PLAIN, HEADER_RE, HEADER_VALUE_RE])
def test_passed_bytes_tell_what_the_search_tells(pattern: re.Pattern[bytes]) -> None:
    # Every byte alone, and random texts of headers' bytes with a rare byte of any value.
    passed = passed_bytes(pattern)
    texts = [bytes((b,)) for b in range(256)] + [b""]
    rng = random.Random(34)
    common = b'abcxyz-019 :;"/=,;ABZ\t'
    for _ in range(5000):
        text = bytearray(rng.choice(common) for _ in range(rng.randrange(0, 60)))
        if text and rng.random() < 0.3:
            text[rng.randrange(len(text))] = rng.randrange(256)
        texts.append(bytes(text))
    for text in texts:
        assert (not text.translate(None, passed)) == (pattern.search(text) is None), text


def test_the_apps_call_is_fastapis_with_its_telemetry_off(app: FastAPI) -> None:
    """`SolarApi.__call__` skips `FastAPI.__call__`'s telemetry check for an HTTP request:
    only right while the app's telemetry is off, which `enabled()` then reports whatever is
    configured globally."""
    assert isinstance(app, SolarApi)
    assert app._telemetry_on is False
    assert app._native_telemetry.enabled() is False
    on = SolarApi(telemetry={"tracing": True, "metrics": False, "logs": False})
    assert on._telemetry_on is True


def test_the_kept_key_hash_is_key_hash() -> None:
    """`authentication._key_hash` keeps `auth.service.key_hash`'s answers: the same hash for
    a well-formed key, every time; a refusal raised again for every bad header, never
    kept."""
    from solarapi.auth.keys import generate_key
    from solarapi.auth.service import key_hash
    from solarapi.errors import Unauthorized
    from solarapi.gateway.authentication import _key_hash
    from solarapi.kit.plans import Environment

    secret = b"s" * 32
    for environment in (Environment.LIVE, Environment.TEST):
        header = f"Bearer {generate_key(environment).key}"
        assert _key_hash(header, secret) == key_hash(header, secret)
        assert _key_hash(header, secret) == key_hash(header, secret)
        assert _key_hash(header, b"t" * 32) == key_hash(header, b"t" * 32)
    for bad in (None, "", "Basic x", "Bearer pk_live_x", "Bearer " + "pk_live_" + "a" * 38):
        for _ in range(2):
            with pytest.raises(Unauthorized) as kept:
                _key_hash(bad, secret)
            with pytest.raises(Unauthorized) as general:
                key_hash(bad, secret)
            assert kept.value.message == general.value.message


def _match_trying_every_route(table: Any, path: str, method: str) -> Any:
    """`RouteTable.match` as it was: every route of the path's group, then of `*`."""
    partial: tuple[str, set[str]] | None = None
    for group in (table._group(path), "*"):
        for regex, template, methods in table._groups.get(group, ()):
            if matched := regex.match(path):
                if method in methods:
                    return table._found(template, methods, method, matched)
                if partial is None:
                    partial = (template, set(methods))
                else:
                    partial[1].update(methods)
    if partial is None:
        return RouteMatch(None, False, frozenset())
    return RouteMatch(partial[0], False, frozenset(partial[1]))


def test_route_candidates_match_what_every_route_matches(app: FastAPI) -> None:
    """The routes tried for a path (`RouteTable._candidates`: its count of slashes and last
    segment) find what trying every route of its group found, over every template of the
    app written out with parameters of several shapes, each cut, extended and bent (a slash
    more, a newline, a segment of another template), and random paths of their segments."""
    table = app.state.route_table.table
    templates = list(table.templates)
    values = ["x1", "sys_01M8ESW1QPVZYFXBPY1FSJNYZ5", "123", "a.b", "x/y", "%2F", ""]
    paths = {"/", "", "/api", "/api/", "/api/v1", "/api/v1/", "//", "/api/v1//x"}
    segments: set[str] = set()
    for template in templates:
        segments.update(template.split("/"))
        for value in values:
            path = re.sub(r"\{[^}]*\}", value, template)
            paths.update({path, path + "/", path + "\n", path[:-1], path + "/readings"})
            paths.add(path.rpartition("/")[0])
    rng = random.Random(34)
    pool = sorted(segments | set(values))
    for _ in range(3000):
        paths.add("/" + "/".join(rng.choice(pool) for _ in range(rng.randrange(1, 8))))
    for path in sorted(paths):
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
            ours, theirs = table.match(path, method), _match_trying_every_route(table, path, method)
            assert ours == theirs, (path, method)


async def test_direct_dispatch_makes_the_request_starlette_makes() -> None:
    """`DirectDispatch` sets a `Request`'s attributes itself: the same as Starlette's own
    `Request(scope, receive)` sets (a new attribute of a later Starlette fails here)."""
    from solarapi.gateway.direct import DIRECT, DirectDispatch

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    made: list[Request] = []

    async def endpoint(request: Request) -> Any:
        made.append(request)

        async def respond(scope: Scope, receive: Receive, send: Send) -> None:
            return None

        return respond

    scope: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    scope[DIRECT] = (endpoint, {})

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not the direct path")

    async def send(message: Message) -> None:
        return None

    await DirectDispatch(app)(scope, receive, send)
    (request,) = made
    assert type(request) is Request
    assert vars(request) == vars(Request(scope, receive))
