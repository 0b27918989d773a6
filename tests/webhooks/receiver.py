"""A real HTTP receiver on 127.0.0.1 for delivery tests: answers with scripted status codes and
records what it received."""

from __future__ import annotations

import threading
import time
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
    # Seconds to wait before answering (a slow receiver).
    delay_seconds: float = 0.0
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
            if receiver.delay_seconds:
                time.sleep(receiver.delay_seconds)
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["receiver"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
