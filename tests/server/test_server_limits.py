"""A real `solarapi serve` process: bounded request heads answered in the `{error, code}`
shape, idle keep-alive connections kept open, and the connection cap. Raw sockets, so what
is tested is what the server itself does before (and instead of) the app."""

from __future__ import annotations

import secrets
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import orjson
import pytest

from solarapi.config import Settings
from solarapi.kit.ids import new_id
from tests.support import run_cli, served, settings_env

KEEP_ALIVE_S = 8
# Longer than uvicorn's own default keep-alive (5 s): a connection still open after this idle
# time shows the setting reached the server.
IDLE_S = 6
MAX_CONNECTIONS = 4
URL_LIMIT = 40 * 1024
HEADER_LIMIT = 32 * 1024
DEADLINE_S = 60


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> dict[str, str]:
        assert self.headers["content-type"] == "application/json", self
        payload: dict[str, str] = orjson.loads(self.body)
        assert set(payload) == {"error", "code"}, payload
        return payload


@pytest.fixture(scope="module")
def server(sqlite_settings: Settings) -> Iterator[tuple[str, int]]:
    env = settings_env(
        sqlite_settings,
        SOLARAPI_JOB_RUNNER="external",
        SOLARAPI_KEEP_ALIVE_SECONDS=str(KEEP_ALIVE_S),
        SOLARAPI_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
    )
    with served(env) as server:
        host, port = server.base.removeprefix("http://").split(":")
        yield host, int(port)


def _connect(server: tuple[str, int]) -> socket.socket:
    return socket.create_connection(server, timeout=DEADLINE_S)


def _read_answer(sock: socket.socket) -> Answer:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the body"
        body += chunk
    return Answer(status, headers, body[:length])


def _request(
    sock: socket.socket, target: str = "/api/v1/health", extra: bytes = b"", close: bool = False
) -> Answer:
    connection = b"close" if close else b"keep-alive"
    sock.sendall(
        b"GET " + target.encode() + b" HTTP/1.1\r\nHost: test\r\n" + extra
        + b"Connection: " + connection + b"\r\n\r\n"
    )  # fmt: skip
    return _read_answer(sock)


def _closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    """True once the server closes the connection; False if it is still open after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if readable:
            try:
                return sock.recv(1) == b""
            except ConnectionResetError:
                return True
    return False


def _assert_refused(answer: Answer, words: str) -> None:
    assert answer.status == 400, answer
    body = answer.error()
    assert body["code"] == "validation"
    assert words in body["error"], body
    assert answer.headers["connection"] == "close"
    assert answer.headers["api-version"] == "1.0"


def test_a_url_over_the_limit_is_a_json_400(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        answer = _request(sock, "/api/v1/health?q=" + "a" * URL_LIMIT)
    _assert_refused(answer, f"URL is longer than the limit of {URL_LIMIT} bytes")
    with _connect(server) as sock:
        assert _request(sock, "/api/v1/health?q=" + "a" * (URL_LIMIT - 100)).status == 200


def test_the_default_url_holds_a_portfolio_request_naming_1000_systems(
    server: tuple[str, int], sqlite_settings: Settings
) -> None:
    """The contract's 1–1,000 `system_ids`, as a client sends them (commas as `%2C`): ~33 kB
    of URL, which the default limit lets through to the API (which names the first id that
    is not the caller's); 1,001 are the API's own 400, not the server's."""
    env = settings_env(sqlite_settings)
    email = f"fleet-{secrets.token_hex(6)}@example.com"
    run_cli(env, "accounts", "create", "--name", "Fleet", "--email", email,
            "--password", "correct horse battery", "--plan", "pro")  # fmt: skip
    key = orjson.loads(run_cli(env, "keys", "create", "--account", email, "--json").stdout)["key"]
    ids = [new_id("sys") for _ in range(1001)]
    host, port = server
    with httpx.Client(base_url=f"http://{host}:{port}/api/v1", timeout=DEADLINE_S) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        thousand = client.get("/portfolio/summary", params={"system_ids": ",".join(ids[:1000])})
        assert len(str(thousand.request.url)) > 32 * 1024
        assert thousand.status_code == 404, thousand.text
        assert thousand.json() == {"error": f"No system with id '{ids[0]}'", "code": "not_found"}
        over = client.get("/portfolio/summary", params={"system_ids": ",".join(ids)})
        assert over.status_code == 400, over.text
        assert "system_ids holds 1,001 ids; at most 1,000" in over.json()["error"]


@pytest.mark.parametrize(
    "headers",
    [
        b"X-Big: " + b"a" * HEADER_LIMIT + b"\r\n",
        b"".join(b"X-Field-%03d: %s\r\n" % (i, b"v" * 200) for i in range(200)),
    ],
    ids=["one-large-header", "many-headers"],
)
def test_headers_over_the_limit_are_a_json_400(server: tuple[str, int], headers: bytes) -> None:
    with _connect(server) as sock:
        answer = _request(sock, extra=headers)
    _assert_refused(answer, f"headers are larger than the limit of {HEADER_LIMIT} bytes")


def test_headers_within_the_limit_are_served(server: tuple[str, int]) -> None:
    headers = b"".join(b"X-Field-%03d: %s\r\n" % (i, b"v" * 200) for i in range(100))
    with _connect(server) as sock:
        assert _request(sock, extra=headers).status == 200


def test_a_30_mb_header_is_cut_off_not_buffered(server: tuple[str, int]) -> None:
    total = 30 * 1024 * 1024
    piece = b"a" * 65536
    sent = 0
    with _connect(server) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: test\r\nX-Huge: ")
        try:
            while sent < total:
                sent += sock.send(piece)
        except OSError:
            pass  # the server closed the connection: what remains is never read
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    assert sent < total, "the server read a 30 MB header to its end"
    if answer:  # the refusal, when it arrived before the reset
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        assert b'"code":"validation"' in answer
    with _connect(server) as sock:
        assert _request(sock).status == 200


def test_invalid_http_is_a_json_400(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        answer = _request(sock, extra=b"Bad Header Name: x\r\n")
    _assert_refused(answer, "not valid HTTP")


def test_an_idle_keep_alive_connection_stays_usable(server: tuple[str, int]) -> None:
    with _connect(server) as sock:
        assert _request(sock).status == 200
        assert not _closed_by_server(sock, IDLE_S), "closed before the keep-alive time"
        assert _request(sock).status == 200  # the same connection, reused after IDLE_S
        idle_from = time.monotonic()
        assert _closed_by_server(sock, DEADLINE_S), "an idle connection is never closed"
        assert time.monotonic() - idle_from >= KEEP_ALIVE_S - 0.5


def test_over_the_cap_the_longest_idle_connection_makes_room(server: tuple[str, int]) -> None:
    idle = [_connect(server) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in idle:  # in order: the first is idle longest
            assert _request(sock).status == 200
        with _connect(server) as newcomer:
            assert _request(newcomer, close=True).status == 200
        assert _closed_by_server(idle[0], DEADLINE_S)
        assert _request(idle[1]).status == 200
    finally:
        for sock in idle:
            sock.close()


def test_over_the_cap_with_none_idle_is_a_json_503(server: tuple[str, int]) -> None:
    busy = [_connect(server) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in busy:  # a request begun and not finished: not idle
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: test\r\n")
        with _connect(server) as newcomer:
            answer = _request(newcomer)
        assert answer.status == 503, answer
        assert answer.error()["code"] == "unavailable"
        assert answer.headers["retry-after"] == "1"
    finally:
        for sock in busy:
            sock.close()


def test_the_defaults_suit_client_pools() -> None:
    defaults = Settings()
    assert defaults.keep_alive_seconds >= 60
    assert 0 < defaults.max_connections < 1024  # below the usual open-file limit
    assert defaults.max_url_bytes == URL_LIMIT
    assert defaults.max_header_bytes == HEADER_LIMIT
