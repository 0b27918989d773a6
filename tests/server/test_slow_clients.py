"""Slow clients against a real `solarapi serve` (raw sockets): a head or a body that stalls is
answered 408 and closed, a half-sent connection makes room over the connection cap, one
address cannot take every connection, and SIGTERM answers a stalled body 503 JSON.

Short limits come from the settings, so nothing waits long; every wait is a deadline that
only bounds a broken run."""

from __future__ import annotations

import asyncio
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from tests.support import Server, make_tenant, running_app, served, settings_env

DEADLINE_S = 60
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: test\r\n"


# Idle keep-alive connections outlive every test's pauses.
KEEP_ALIVE = "120"


@pytest.fixture(scope="module")
def quick(sqlite_settings: Settings) -> Iterator[Server]:
    """Short read limits: a head must be complete 1 s after its first byte, a body must
    arrive at 1,000 bytes/s over each second."""
    env = settings_env(
        sqlite_settings,
        SOLARAPI_KEEP_ALIVE_SECONDS=KEEP_ALIVE,
        SOLARAPI_HEADER_TIMEOUT_SECONDS="1",
        SOLARAPI_BODY_MIN_RATE="1000",
        SOLARAPI_BODY_RATE_WINDOW_SECONDS="1",
    )
    with served(env) as server:
        yield server


@pytest.fixture(scope="module")
def patient(sqlite_settings: Settings) -> Iterator[Server]:
    """Long read limits (nothing times out during a test) and small connection caps."""
    env = settings_env(
        sqlite_settings,
        SOLARAPI_KEEP_ALIVE_SECONDS=KEEP_ALIVE,
        SOLARAPI_HEADER_TIMEOUT_SECONDS="600",
        SOLARAPI_BODY_RATE_WINDOW_SECONDS="600",
        SOLARAPI_MAX_CONNECTIONS="6",
        SOLARAPI_MAX_CONNECTIONS_PER_IP="3",
    )
    with served(env) as server:
        yield server


@pytest.fixture(scope="module")
def key(sqlite_settings: Settings) -> str:
    async def make() -> str:
        async with running_app(sqlite_settings) as app:
            return (await make_tenant(app, Plan.ENTERPRISE)).live

    return asyncio.run(make())


def _address(server: Server) -> tuple[str, int]:
    host, port = server.base.removeprefix("http://").split(":")
    return host, int(port)


def _connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection from `source` (any 127.x address is this host: each is its own client)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(DEADLINE_S)
    sock.bind((source, 0))
    sock.connect(_address(server))
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def _headers(answer: bytes) -> dict[str, str]:
    head = answer.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head)}


def _error(answer: bytes) -> dict[str, str]:
    headers = _headers(answer)
    assert headers["content-type"] == "application/json", answer
    assert headers["connection"] == "close", answer
    assert headers["api-version"] == "1.0", answer
    payload: dict[str, str] = orjson.loads(answer.partition(b"\r\n\r\n")[2])
    assert set(payload) == {"error", "code"}, payload
    return payload


def _get(server: Server, source: str = "127.0.0.1") -> int:
    with _connect(server, source) as sock:
        sock.sendall(HEAD + b"Connection: close\r\n\r\n")
        return _status(_read_all(sock))


# --- timed reads ------------------------------------------------------------------------


def test_a_half_sent_head_is_answered_408_and_closed(quick: Server) -> None:
    with _connect(quick) as sock:
        sock.sendall(HEAD)  # and never the blank line
        answer = _read_all(sock)
    assert _status(answer) == 408, answer
    body = _error(answer)
    assert body["code"] == "request_timeout"
    assert "head was not complete within 1 s" in body["error"]
    assert _get(quick) == 200


def test_a_head_trickled_byte_by_byte_is_cut_off_too(quick: Server) -> None:
    """The timeout runs from the first byte: data arriving does not renew it."""
    answer = b""
    with _connect(quick) as sock:
        sock.sendall(HEAD + b"X-Slow: ")
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            # One byte each 50 ms, until the server answers and closes.
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                answer = _read_all(sock)
                break
            try:
                sock.send(b"a")
            except OSError:
                answer = _read_all(sock)
                break
    assert answer, "the server kept reading a head trickled for a minute"
    assert _status(answer) == 408
    assert _error(answer)["code"] == "request_timeout"


def test_a_stalled_body_is_answered_408_and_its_request_ends(quick: Server, key: str) -> None:
    with _connect(quick) as sock:
        sock.sendall(
            b"POST /api/v1/systems HTTP/1.1\r\nHost: test\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            b'{"name": "slow'
        )
        answer = _read_all(sock)
    assert _status(answer) == 408, answer
    body = _error(answer)
    assert body["code"] == "request_timeout"
    assert "slower than 1000 bytes per second" in body["error"]
    assert _get(quick) == 200


def test_a_stalled_body_after_an_early_answer_is_closed(quick: Server) -> None:
    """Refused before its body was read (no key: 401), the rest of the body stalls: the
    connection does not stay open waiting for it."""
    with _connect(quick) as sock:
        sock.sendall(
            b"POST /api/v1/systems HTTP/1.1\r\nHost: test\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"
        )
        answer = _read_all(sock)  # returns once the server closes
    assert _status(answer) == 401, answer


# --- connection caps ----------------------------------------------------------------------


def test_half_sent_heads_make_room_over_the_connection_cap(patient: Server) -> None:
    half_sent = [_connect(patient, f"127.0.0.{2 + n % 2}") for n in range(6)]
    try:
        for sock in half_sent:
            sock.sendall(HEAD)
        # Until they have been quiet a second, a newcomer may be told 503; then one of them
        # is closed to make room.
        deadline = time.monotonic() + DEADLINE_S
        statuses = []
        while (status := _get(patient, "127.0.0.4")) != 200:
            statuses.append(status)
            assert time.monotonic() < deadline, f"never served: {statuses}"
        assert set(statuses) <= {503}, statuses
        evicted = [s for s in half_sent if select.select([s], [], [], 0)[0]]
        assert evicted, "no half-sent connection was closed"
        answer = _read_all(evicted[0])
        assert _status(answer) == 408
        assert _error(answer)["code"] == "request_timeout"
    finally:
        for sock in half_sent:
            sock.close()


def _body_in_progress(server: Server, source: str, key: str) -> socket.socket:
    """A connection whose request the app is reading the body of ("100 Continue" is sent
    when the app first reads it)."""
    sock = _connect(server, source)
    sock.sendall(
        b"POST /api/v1/systems HTTP/1.1\r\nHost: test\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\n"
        b"Expect: 100-continue\r\n"
        b"Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n"
    )
    interim = b""
    while b"\r\n\r\n" not in interim:
        chunk = sock.recv(1024)
        assert chunk, "closed before 100 Continue"
        interim += chunk
    assert interim.startswith(b"HTTP/1.1 100"), interim
    sock.sendall(b'{"name": "')
    return sock


def test_one_address_cannot_take_every_connection(patient: Server, key: str) -> None:
    busy = [_body_in_progress(patient, "127.0.0.5", key) for _ in range(3)]
    stop = threading.Event()

    def trickle() -> None:
        # Bodies that keep arriving: never stalled, so never closed to make room.
        while not stop.wait(0.05):
            for sock in busy:
                sock.send(b"a")

    feeder = threading.Thread(target=trickle)
    feeder.start()
    try:
        with _connect(patient, "127.0.0.5") as fourth:
            answer = _read_all(fourth)
        assert _status(answer) == 429, answer
        assert _headers(answer)["retry-after"] == "1"
        body = _error(answer)
        assert body["code"] == "rate_limit"
        assert "from one address (limit 3)" in body["error"]
        assert _get(patient, "127.0.0.6") == 200  # other addresses are served
    finally:
        stop.set()
        feeder.join()
        for sock in busy:
            sock.close()
    # Once they are gone the address is served again.
    deadline = time.monotonic() + DEADLINE_S
    while _status_or_none(patient, "127.0.0.5") != 200:
        assert time.monotonic() < deadline, "the address stayed refused"


def _status_or_none(server: Server, source: str) -> int | None:
    try:
        return _get(server, source)
    except (AssertionError, OSError):
        return None


# --- shutdown -----------------------------------------------------------------------------


def test_sigterm_answers_a_stalled_body_503_json(
    sqlite_settings: Settings, key: str, tmp_path: Path
) -> None:
    env = settings_env(
        sqlite_settings,
        SOLARAPI_KEEP_ALIVE_SECONDS=KEEP_ALIVE,
        SOLARAPI_BODY_RATE_WINDOW_SECONDS="600",
    )
    with served(env) as server, _connect(server) as sock:
        sock.sendall(
            b"POST /api/v1/systems HTTP/1.1\r\nHost: test\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\n"
            b"Expect: 100-continue\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
        )
        # "100 Continue" is sent when the app first reads the body: the request is in.
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = sock.recv(1024)
            assert chunk, "closed before 100 Continue"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100"), interim
        sock.sendall(b'{"name": "stalled')
        server.process.send_signal(signal.SIGTERM)
        answer = _read_all(sock)
        assert server.process.wait(DEADLINE_S) in (0, -signal.SIGTERM)
        log = server.text()
    assert _status(answer) == 503, answer
    assert _headers(answer)["retry-after"] == "1"
    assert _error(answer)["code"] == "unavailable"
    assert "Internal Server Error" not in log


# --- HEAD ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/api/v1/openapi.json", "/api/v1/account"])
def test_head_on_a_routed_get_answers_its_headers_and_keeps_the_connection(
    quick: Server, key: str, target: str
) -> None:
    """The gateway runs GET for a HEAD; the server's own scope must stay HEAD, or it expects
    the body it announced and drops the connection (two tracebacks, no answer)."""
    auth = b"Authorization: Bearer " + key.encode() + b"\r\n"
    with _connect(quick) as sock:
        sock.sendall(b"HEAD " + target.encode() + b" HTTP/1.1\r\nHost: test\r\n" + auth + b"\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(65536)
            assert chunk, f"closed without an answer: {head!r}"
            head += chunk
        assert _status(head) == 200, head
        headers = _headers(head)
        assert int(headers["content-length"]) > 0
        assert head.endswith(b"\r\n\r\n"), "a body followed the head"
        # The same connection serves the next request: nothing was left half-sent.
        sock.sendall(HEAD + b"Connection: close\r\n\r\n")
        after = _read_all(sock)
    assert _status(after) == 200, after
    assert "Traceback" not in quick.text()
    assert "Exception in ASGI application" not in quick.text()
