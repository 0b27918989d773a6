"""A real HTTP receiver on 127.0.0.1 for delivery tests: answers with scripted status codes and
records what it received."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    # Status codes to answer, in order; once used up, `default_status`.
    script: list[int] = field(default_factory=list)
    default_status: int = 200
    # Cleared, the receiver answers nothing until the test is over (a receiver slower than
    # any timeout, however slow the machine).
    answering: threading.Event = field(default_factory=threading.Event)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.script.pop(0) if self.script else self.default_status


@contextmanager
def running_receiver(
    script: list[int] | None = None, default_status: int = 200
) -> Iterator[Receiver]:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            receiver = holder["receiver"]
            with receiver.lock:
                receiver.received.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
            status = receiver.next_status()
            receiver.answering.wait(600)
            try:
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except (BrokenPipeError, ConnectionResetError):
                # The sender gave up first (the timeout test): expected, not an error.
                return

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    holder["receiver"] = Receiver(
        url=f"http://127.0.0.1:{port}/hooks",
        script=list(script or []),
        default_status=default_status,
    )
    holder["receiver"].answering.set()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["receiver"]
    finally:
        holder["receiver"].answering.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
