"""The request id: the client's `X-Request-ID` when it is a sane token, else a new one."""

from __future__ import annotations

import os
import random
import re
import time

_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")

# Crockford's base32, which ULIDs are written in, two characters (ten bits) at a time.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]

# The ids' random bits: a generator of this process's own, seeded from the system's entropy
# when this module is imported and again in every child forked from the process, so no two
# processes (workers, forked or spawned) draw the same bits. Not `os.urandom`: that is a
# `getrandom` system call per request. Not the `random` module's shared generator: a
# `random.seed(n)` anywhere in the process would make every process draw the same ids. A
# request id is only ever a name for a request in logs and error messages, never a secret.
_RANDOM = random.Random()
os.register_at_fork(after_in_child=_RANDOM.seed)
_random_bits = _RANDOM.getrandbits


def request_id(incoming: str | None) -> str:
    return incoming if incoming and _REQUEST_ID.fullmatch(incoming) else new_request_id()


def new_request_id() -> str:
    """`req_` and a ULID, as `kit.ids.new_id("req")` writes one — 48 bits of Unix
    milliseconds, then 80 random bits, in 26 Crockford base32 characters (130 bits, the
    first two zero) — written ten bits at a time: python-ulid's generator (a lock, its
    monotonic policy within a millisecond, 26 lookups) cost ~48,000 instructions per
    request (callgrind, bench/fleet/README.md). The time's five pairs and the random bits'
    eight in one f-string (a list comprehension over the shifts of one 128-bit number cost
    ~7,000 instructions more). Ids made in the same millisecond are not ordered among
    themselves (a request id is only ever compared for equality)."""
    ms = time.time_ns() // 1_000_000  # < 2**48 until the year 10889
    bits = _random_bits(80)
    p = _PAIRS
    return (
        f"req_{p[ms >> 40]}{p[ms >> 30 & 1023]}{p[ms >> 20 & 1023]}{p[ms >> 10 & 1023]}"
        f"{p[ms & 1023]}{p[bits >> 70]}{p[bits >> 60 & 1023]}{p[bits >> 50 & 1023]}"
        f"{p[bits >> 40 & 1023]}{p[bits >> 30 & 1023]}{p[bits >> 20 & 1023]}"
        f"{p[bits >> 10 & 1023]}{p[bits & 1023]}"
    )
