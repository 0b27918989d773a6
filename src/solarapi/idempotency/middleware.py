"""`Idempotency-Key` on POST requests under /api/v1: a pure ASGI middleware inside the gateway
(so the caller is authenticated and counted first; 401/403/429 are never stored).

- First request with a key: the key is taken (committed) before the endpoint runs. The
  endpoint's answer is held back until it is stored as the key's response, then sent: a
  client that retries the moment it has the answer gets a replay (`Idempotent-Replayed:
  true`), never "still being processed". Repeats are answered for 24 h.
- Same key, different method, path or body → 409; same key while the first still runs → 409.
- Keys are scoped to the API key (or, on `POST /ingest/readings`, to the ingest token), so
  two keys (or the live and test key, or two loggers) never collide.
- A response with status ≥ 500 is not stored and the key is released: the endpoint's own
  transaction rolled back (only the request session commits, and it commits before a 2xx),
  so a retry with the same key may run, and should.
- A process that dies between the endpoint's commit and storing its response leaves the key
  taken but incomplete: repeats get 409 "still being processed" for at most
  `store.ABANDONED_AFTER`, then 409 "never completed" until the key expires — never a
  second run of a change that may have been made.
- Fields an endpoint marks with `replay_without` (a webhook's signing secret) are left out
  of the stored response, so a replay answers without them: secrets are shown once.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import orjson
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from solarapi.auth.principal import INGEST_CALLER, IngestCaller, Principal
from solarapi.auth.scopes import API_PREFIX
from solarapi.errors import ApiError, Conflict, ValidationFailed, render_api_error
from solarapi.idempotency import store
from solarapi.kit.timefmt import utcnow

log = logging.getLogger("solarapi.idempotency")
HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
# Where an endpoint names the response fields a replay must not repeat (scope["state"]).
_REPLAY_WITHOUT = "idempotency_replay_without"


def replay_without(request: Request, *fields: str) -> None:
    """Leave these top-level fields of the JSON response out of what is stored for a replay
    (the first answer still carries them). For values shown once, like a signing secret."""
    request.scope.setdefault("state", {}).setdefault(_REPLAY_WITHOUT, set()).update(fields)


def key_problem(key: str) -> str | None:
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        return f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters; got {len(key)}"
    if any(not 0x20 <= ord(char) <= 0x7E for char in key):
        return "Idempotency-Key must contain only printable ASCII characters"
    return None


def request_fingerprint(method: str, target: str, body: bytes) -> str:
    digest = hashlib.sha256()
    # The path is percent-decoded text and may hold any character (UTF-8, not Latin-1).
    for part in (method.encode(), target.encode(), body):
        # Length-prefixed, so no two different requests hash the same concatenation.
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


@dataclass(slots=True)
class _Held:
    """The endpoint's answer, held back until it is stored."""

    messages: list[Message] = field(default_factory=list)
    status: int | None = None
    headers: list[list[str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    complete: bool = False

    async def capture(self, message: Message) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = [
                [name.decode("latin-1"), value.decode("latin-1")]
                for name, value in message.get("headers", [])
            ]
        elif message["type"] == "http.response.body":
            self.chunks.append(bytes(message.get("body", b"")))
            self.complete = not message.get("more_body", False)

    @property
    def failed(self) -> bool:
        """Nothing committed: no answer, or a server error (its transaction rolled back)."""
        return self.status is None or self.status >= 500

    async def release(self, send: Send) -> None:
        for message in self.messages:
            await send(message)


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _key_of(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        try:
            body = await _checked_body(key, receive)
        except ApiError as refused:
            await render_api_error(refused)(scope, receive, send)
            return
        if body is None:
            return  # the client went away mid-body: nothing ran, nothing to answer
        outcome = await _claim(scope, key, body)
        if isinstance(outcome, store.Refused):
            await render_api_error(Conflict(outcome.message))(scope, receive, send)
        elif isinstance(outcome, store.Replay):
            await _replay(outcome, send)
        else:
            await self._first_run(scope, _replaying(body, receive), send, outcome.record_id)

    async def _first_run(self, scope: Scope, receive: Receive, send: Send, record_id: int) -> None:
        maker = scope["app"].state.sessionmaker
        held = _Held()
        try:
            await self.app(scope, receive, held.capture)
        except BaseException:
            if held.failed:
                await _release_quietly(maker, record_id)
            elif held.complete:
                # A complete answer, then a failure (a background task): its change
                # committed, so it is stored and answered like any other.
                await _store(maker, record_id, held, scope)
                await held.release(send)
            # Else a success broke off half-way: its change committed but there is no whole
            # answer to store, so the key stays taken (abandoned: 409, never a rerun).
            raise
        if held.failed:
            await store.release(maker, record_id)
        else:
            await _store(maker, record_id, held, scope)
        await held.release(send)


def _key_of(scope: Scope) -> str | None:
    """The request's Idempotency-Key when the middleware applies: an authenticated POST under
    the API (not a request the gateway let through unauthenticated, like 404/405)."""
    if (
        scope["type"] != "http"
        or scope["method"] != "POST"
        or not scope["path"].startswith(API_PREFIX + "/")
        or _holder_of(scope) is None
    ):
        return None
    return Headers(scope=scope).get(HEADER)


def _holder_of(scope: Scope) -> store.Holder | None:
    """Whose keys the request's are: its API key's, or its ingest token's (the gateway left
    one of the two on the request)."""
    state = scope.get("state", {})
    principal = state.get("principal")
    if isinstance(principal, Principal):
        return store.Holder(api_key_id=principal.key_id)
    logger = state.get(INGEST_CALLER)
    if isinstance(logger, IngestCaller):
        return store.Holder(ingest_token_id=logger.token_id)
    return None


async def _checked_body(key: str, receive: Receive) -> bytes | None:
    problem = key_problem(key)
    if problem is not None:
        raise ValidationFailed(problem)
    # The gateway's body checks raise their ApiErrors (413, 400) while the body is read.
    return await _read_body(receive)


async def _claim(scope: Scope, key: str, body: bytes) -> store.ClaimOutcome:
    query = scope.get("query_string", b"").decode("latin-1")
    target = scope["path"] + (f"?{query}" if query else "")
    holder = _holder_of(scope)
    assert holder is not None  # _key_of applies the middleware to such requests only
    return await store.claim(
        scope["app"].state.sessionmaker,
        holder=holder,
        key=key,
        request_hash=request_fingerprint(scope["method"], target, body),
        method=scope["method"],
        path=target[:2048],  # shown in messages only; the hash covers all of it
        now=utcnow(),
    )


async def _store(maker: store.Maker, record_id: int, held: _Held, scope: Scope) -> None:
    assert held.status is not None
    body = b"".join(held.chunks)
    withheld: set[str] = scope.get("state", {}).get(_REPLAY_WITHOUT, set())
    if withheld:
        body = _without_fields(body, withheld)
    await store.complete(
        maker,
        record_id,
        status=held.status,
        # The length is the replayed body's own, set when it is replayed.
        headers=[pair for pair in held.headers if pair[0].lower() != "content-length"],
        body=body,
        now=utcnow(),
    )


def _without_fields(body: bytes, fields: set[str]) -> bytes:
    content = orjson.loads(body)
    if not isinstance(content, dict):
        return body
    return orjson.dumps({name: value for name, value in content.items() if name not in fields})


async def _release_quietly(maker: store.Maker, record_id: int) -> None:
    try:
        await store.release(maker, record_id)
    except Exception:
        # Releasing must not hide the original error (the database may be what failed);
        # the key then reads as abandoned after a while.
        log.exception("could not release Idempotency-Key %s", record_id)


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
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in stored.headers
        if name.lower() != "content-length"  # stored by earlier versions
    ]
    headers.append((b"content-length", str(len(stored.body)).encode()))
    headers.append((b"idempotent-replayed", b"true"))
    await send({"type": "http.response.start", "status": stored.status, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body, "more_body": False})
