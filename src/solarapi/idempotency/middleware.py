"""`Idempotency-Key` on POST requests under /api/v1: a pure ASGI middleware inside the gateway
(so the caller is authenticated and counted first; 401/403/429 are never stored).

- First request with a key: the key is taken (committed) before the endpoint runs; the
  response is stored after it, then answered to repeats for 24 h with
  `Idempotent-Replayed: true`.
- Same key, different method, path or body → 409; same key while the first still runs → 409.
- Keys are scoped to the API key, so two keys (or the live and test key) never collide.
- A response with status ≥ 500 is not stored and the key is released: the endpoint's own
  transaction rolled back (only the request session commits, and it commits before a 2xx),
  so a retry with the same key may run, and should.
"""

from __future__ import annotations

import hashlib
import logging

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from solarapi.auth.principal import Principal
from solarapi.auth.scopes import API_PREFIX
from solarapi.errors import (
    Conflict,
    ValidationFailed,
    http_exception_response,
    render_api_error,
)
from solarapi.idempotency import store
from solarapi.kit.timefmt import utcnow

log = logging.getLogger("solarapi.idempotency")
HEADER = b"idempotency-key"
MAX_KEY_LENGTH = 255


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def key_problem(key: str) -> str | None:
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        return f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters; got {len(key)}"
    if any(not 0x20 <= ord(char) <= 0x7E for char in key):
        return "Idempotency-Key must contain only printable ASCII characters"
    return None


def request_fingerprint(method: str, target: str, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (method.encode(), target.encode("latin-1"), body):
        # Length-prefixed, so no two different requests hash the same concatenation.
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not scope["path"].startswith(API_PREFIX + "/")
        ):
            await self.app(scope, receive, send)
            return
        key = _header(scope, HEADER)
        principal = scope.get("state", {}).get("principal")
        if key is None or not isinstance(principal, Principal):
            # No key, or a request the gateway let through unauthenticated (404/405 routing
            # answers): nothing to remember.
            await self.app(scope, receive, send)
            return
        problem = key_problem(key)
        if problem is not None:
            await render_api_error(ValidationFailed(problem))(scope, receive, send)
            return
        try:
            body = await _read_body(receive)
            if body is None:
                return  # the client went away mid-body: nothing ran, nothing to answer
        except HTTPException as exc:
            # The gateway's body checks (size, NUL) fail while the body is read.
            await http_exception_response(exc)(scope, receive, send)
            return

        query = scope.get("query_string", b"").decode("latin-1")
        target = scope["path"] + (f"?{query}" if query else "")
        maker = scope["app"].state.sessionmaker
        outcome = await store.claim(
            maker,
            api_key_id=principal.key_id,
            key=key,
            request_hash=request_fingerprint(scope["method"], target, body),
            method=scope["method"],
            path=target[:2048],  # shown in messages only; the hash covers all of it
            now=utcnow(),
        )
        if isinstance(outcome, store.Refused):
            await render_api_error(Conflict(outcome.message))(scope, receive, send)
            return
        if isinstance(outcome, store.Replay):
            await _replay(outcome, send)
            return

        status: int | None = None
        headers: list[list[str]] = []
        chunks: list[bytes] = []
        complete = False

        async def capture(message: Message) -> None:
            nonlocal status, complete
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers.extend(
                    [name.decode("latin-1"), value.decode("latin-1")]
                    for name, value in message.get("headers", [])
                )
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                complete = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, _replaying(body, receive), capture)
        except BaseException:
            if status is None or status >= 500:
                # Nothing committed (the endpoint raised before answering): a retry may run.
                try:
                    await store.release(maker, outcome.record_id)
                except Exception:
                    # Releasing must not hide the original error (the database may be what
                    # failed); the key then reads as abandoned after a while.
                    log.exception("could not release Idempotency-Key %s", outcome.record_id)
            elif complete:
                await store.complete(
                    maker, outcome.record_id, status=status, headers=headers,
                    body=b"".join(chunks), now=utcnow(),
                )  # fmt: skip
            # Else a success was half sent when sending failed: its change committed but the
            # response is incomplete, so the key stays taken (abandoned: 409, never a rerun).
            raise
        if status is None or status >= 500:
            await store.release(maker, outcome.record_id)
            return
        await store.complete(
            maker,
            outcome.record_id,
            status=status,
            headers=headers,
            body=b"".join(chunks),
            now=utcnow(),
        )


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (it is part of what "the same request" means), or None if the
    client disconnected before sending all of it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(bytes(message.get("body", b"")))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body we already read, then the real channel (for
    the disconnect message)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _replay(stored: store.Replay, send: Send) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in stored.headers]
    headers.append((b"idempotent-replayed", b"true"))
    await send({"type": "http.response.start", "status": stored.status, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body, "more_body": False})
