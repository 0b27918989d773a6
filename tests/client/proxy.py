"""A TCP proxy in front of the real server that breaks the first connections on purpose: it
resets them before the request reaches the server, or after the server has answered (the
answer is lost on the way back). Everything else is forwarded unchanged, one request per
connection."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["before", "after"]


@dataclass
class Proxy:
    url: str
    mode: Mode
    drops: int
    requests: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def headers_of(self, index: int) -> dict[str, str]:
        head = self.requests[index].split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        return {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in head[1:])}


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


def _one_request_per_connection(request: bytes) -> bytes:
    head, body = request.split(b"\r\n\r\n", 1)
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body


def _reset(conn: socket.socket) -> None:
    # SO_LINGER with a zero timeout: close() sends a TCP RST, as a crashed peer would.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


@contextmanager
def flaky_proxy(target: str, mode: Mode, drops: int) -> Iterator[Proxy]:
    host, port = target.removeprefix("http://").split(":")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    proxy = Proxy(f"http://127.0.0.1:{listener.getsockname()[1]}", mode, drops)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        request = _read_request(conn)
        if not request:
            conn.close()
            return
        with proxy.lock:
            index = len(proxy.requests)
            proxy.requests.append(request)
        drop = index < proxy.drops
        if drop and proxy.mode == "before":
            _reset(conn)
            return
        with socket.create_connection((host, int(port))) as upstream:
            upstream.sendall(_one_request_per_connection(request))
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
        if drop:
            _reset(conn)
            return
        conn.sendall(answer)
        conn.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        # close() alone does not wake a thread blocked in accept() on Linux (every test using
        # the proxy waited out the join's 5 s); shutdown() does.
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)
        assert not thread.is_alive(), "the proxy's accept loop did not stop"
