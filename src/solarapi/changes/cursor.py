"""The change feed's cursor: an opaque, signed position in the log.

A cursor is the position (`txid`, `seq`, `start_s`) of the last change a client received —
its batch and, since a page may end inside a batch, the last quarter-hour of the batch
delivered — and the time it was issued, signed with HMAC-SHA256 under the server secret over those bytes *and* the
account and environment it was issued to — which the cursor itself does not carry. So a
cursor cannot be forged or edited, one of another account or environment fails its check
(and tells nothing of that tenant), and it expires after `MAX_AGE`.

Version 1 (before migration 0021, when the log had a row per reading) carried (`txid`,
`seq`) alone, the position of one reading; it is still accepted (`Position.version_1`) and
translated by the feed into the batch the migration made of that reading's run
(`changes.repository.translate_version_1`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from solarapi.errors import ValidationFailed

MAX_AGE = timedelta(days=30)
_VERSION = 2
_PAYLOAD = struct.Struct(">Bqqqq")  # version, txid, seq, start_s, issued (epoch seconds)
_PAYLOAD_V1 = struct.Struct(">Bqqq")  # version 1: txid, seq, issued
_MAC_BYTES = 16
# base64 of 49 bytes is 66 characters (version 1: 41 bytes, 55); anything longer is not ours
_TOKEN_CHARS = 66
AFTER_BATCH = (1 << 63) - 1  # `start_s` of a position after every row of its batch
_START_AGAIN = "start again without a cursor"


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a client is in the log: every change at or before (`txid`, `seq`, `start_s`)
    was delivered — every batch before (`txid`, `seq`), and that batch's rows up to
    `start_s`. (0, 0, AFTER_BATCH) is before the first change (no batch has `seq` 0)."""

    txid: int
    seq: int
    start_s: int = AFTER_BATCH
    # A version-1 cursor's (`txid`, `seq`): a reading's position in the old log, to be
    # translated before use.
    version_1: bool = field(default=False, compare=False)


START = Position(0, 0)


def _mac(secret: bytes, account_id: str, environment: str, payload: bytes) -> bytes:
    binding = f"changes|{account_id}|{environment}|".encode()
    return hmac.new(secret, binding + payload, hashlib.sha256).digest()[:_MAC_BYTES]


def encode(
    position: Position, *, secret: bytes, account_id: str, environment: str, now: datetime
) -> str:
    payload = _PAYLOAD.pack(
        _VERSION, position.txid, position.seq, position.start_s, int(now.timestamp())
    )
    return _text(payload + _mac(secret, account_id, environment, payload))


def _text(raw: bytes) -> str:
    """A cursor's one spelling: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(
    token: str, *, secret: bytes, account_id: str, environment: str, now: datetime
) -> Position:
    """The position of a cursor issued to this account and environment; ValidationFailed
    (400) for anything else: malformed, altered, another tenant's, or expired."""
    if len(token) > _TOKEN_CHARS:
        raise ValidationFailed(f"cursor is not a cursor of this feed; {_START_AGAIN}")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise ValidationFailed(f"cursor is malformed; {_START_AGAIN}") from None
    # Base64 decoding forgives padding, the standard alphabet's `+` and `/`, characters
    # outside the alphabet and the last character's unused bits: only the issued spelling
    # is a cursor.
    size = len(raw) - _MAC_BYTES
    if size not in (_PAYLOAD.size, _PAYLOAD_V1.size) or _text(raw) != token:
        raise ValidationFailed(f"cursor is malformed; {_START_AGAIN}")
    payload, mac = raw[:size], raw[size:]
    if not hmac.compare_digest(mac, _mac(secret, account_id, environment, payload)):
        raise ValidationFailed(
            "cursor was not issued to this key's account and environment, or was altered; "
            + _START_AGAIN
        )
    if size == _PAYLOAD_V1.size:
        version, txid, seq, issued = _PAYLOAD_V1.unpack(payload)
        start_s, expected = AFTER_BATCH, 1
    else:
        version, txid, seq, start_s, issued = _PAYLOAD.unpack(payload)
        expected = _VERSION
    if version != expected or txid < 0 or seq < 0:
        raise ValidationFailed(f"cursor is malformed; {_START_AGAIN}")
    if now.timestamp() - issued > MAX_AGE.total_seconds():
        raise ValidationFailed(
            f"cursor has expired (cursors are valid for {MAX_AGE.days} days); {_START_AGAIN}"
        )
    return Position(txid, seq, start_s, version_1=size == _PAYLOAD_V1.size)
