"""The request id: the client's `X-Request-ID` when it is a sane token, else a new one."""

from __future__ import annotations

import os
import re
import time
from base64 import b32encode

_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")

# RFC 4648's base32 alphabet to Crockford's, which ULIDs are written in.
_CROCKFORD = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)


def request_id(incoming: str | None) -> str:
    return incoming if incoming and _REQUEST_ID.fullmatch(incoming) else new_request_id()


def new_request_id() -> str:
    """`req_` and a ULID, as `kit.ids.new_id("req")` writes one — 48 bits of Unix
    milliseconds, then 80 random bits, in 26 Crockford base32 characters — written by the
    standard library's base32 in C: python-ulid's generator (a lock, its monotonic policy
    within a millisecond, 26 table lookups in Python) cost ~48,000 instructions per request,
    this ~5,000 (callgrind, bench/fleet/README.md). Ids made in the same millisecond are not
    ordered among themselves (a request id is only ever compared for equality)."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10))
    # 130 bits of base32 hold the 128: two zero bits first (value << 6 in 17 bytes).
    return "req_" + b32encode((value << 6).to_bytes(17)).translate(_CROCKFORD)[:26].decode()
