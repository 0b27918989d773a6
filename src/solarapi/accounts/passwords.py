"""Argon2id password hashing, with a dummy verification for unknown users (no timing oracle)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Protocol, TypeVar

from argon2 import Parameters, PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

# Argon2id with RFC 9106's low-memory profile (64 MiB, 3 passes, 4 lanes): argon2-cffi's default.
T = TypeVar("T")

PROFILE = profiles.RFC_9106_LOW_MEMORY


class Hasher(Protocol):
    """What hashing needs of argon2-cffi's `PasswordHasher` (a test may wrap one)."""

    def hash(self, password: str, /) -> str: ...

    def verify(self, password_hash: str, password: str, /) -> bool: ...


_hasher: Hasher = PasswordHasher.from_parameters(PROFILE)


def hasher() -> Hasher:
    """The hasher new passwords are hashed with."""
    return _hasher


def use_hasher(replacement: Hasher) -> Hasher:
    """Hash new passwords with `replacement` from now on; returns the hasher it replaces.
    Verifying reads the parameters from each stored hash, so hashes made before still verify."""
    global _hasher
    previous, _hasher = _hasher, replacement
    return previous


def use_profile(parameters: Parameters) -> Hasher:
    """Hash new passwords with argon2 `parameters` from now on (a test process uses
    `argon2.profiles.CHEAPEST`: most tests make an account, and production's cost would be
    ~0.1–0.25 s of CPU each); returns the hasher it replaces."""
    return use_hasher(PasswordHasher.from_parameters(parameters))


@cache
def _dummy_hash() -> str:
    # Made on first use, not at import: one Argon2 hash (~0.25 s) would slow every command.
    return _hasher.hash("dummy password that nobody has")


MIN_PASSWORD_LENGTH = 10


# Argon2 is deliberately slow (~0.1–0.25 s of CPU and 64 MiB each); it runs off the event
# loop, in a pool of its own: on the default pool a 30-log-in burst had taken every thread
# that the sandbox model and DNS lookups need, and API reads slowed ×10 (issue 28). At most
# half the CPUs' worth of checks run at once and at most MAX_WAITING_CHECKS wait for one;
# beyond that a log-in is refused (503) instead of queued. Each check still hashes its 4 lanes
# on 4 threads of libargon2's own (the lanes are part of the stored hashes), so a burst can
# take every core: the pool's threads, and the lane threads they start, run at a lower CPU
# priority (nice ARGON2_NICE), so the event loop answering API reads goes first and a burst
# of log-ins takes the CPU the API leaves over.
ARGON2_THREADS = max(1, (os.cpu_count() or 2) // 2)
ARGON2_NICE = 10
MAX_WAITING_CHECKS = 64


def _lower_priority() -> None:
    """The pool thread's initializer: nice this thread by ARGON2_NICE more than it was (Linux: per thread; the lane threads
    libargon2 starts from it inherit the value). Elsewhere the call may not exist or may be
    refused, and the checks run at normal priority."""
    try:
        thread = threading.get_native_id()
        own = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, own + ARGON2_NICE))
    except (AttributeError, OSError):
        pass


_POOL = ThreadPoolExecutor(
    max_workers=ARGON2_THREADS, thread_name_prefix="argon2", initializer=_lower_priority
)
_in_flight = 0


class PasswordChecksBusy(Exception):
    """More password checks are queued than MAX_WAITING_CHECKS: try again shortly."""


async def _in_pool(function: Callable[..., T], *args: object) -> T:
    global _in_flight
    if _in_flight >= ARGON2_THREADS + MAX_WAITING_CHECKS:
        raise PasswordChecksBusy
    _in_flight += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(_POOL, function, *args)
    finally:
        _in_flight -= 1


async def hash_password(password: str) -> str:
    return await _in_pool(_hasher.hash, password)


def _verify(password_hash: str | None, password: str) -> bool:
    try:
        return (
            _hasher.verify(password_hash or _dummy_hash(), password) and password_hash is not None
        )
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def verify_password(password_hash: str | None, password: str) -> bool:
    """Constant-work check: an unknown user costs the same as a wrong password."""
    return await _in_pool(_verify, password_hash, password)


# At least this many different characters: twelve spaces, "aaaaaaaaaa" or "1212121212" are
# ten characters but no secret (NIST SP 800-63B: refuse repetitive characters).
MIN_DISTINCT_CHARACTERS = 4

# The best-known passwords of ten or more characters (lower-cased), refused whatever the case
# (NIST SP 800-63B: refuse commonly used passwords and sequences).
COMMON_PASSWORDS = frozenset(
    {
        "0123456789",
        "1234567890",
        "0987654321",
        "9876543210",
        "12345678910",
        "123456789a",
        "1q2w3e4r5t",
        "1qaz2wsx3edc",
        "abcdefghij",
        "qwertyuiop",
        "asdfghjkl;",
        "password12",
        "password123",
        "password1234",
        "password!!",
        "passw0rd123",
        "iloveyou12",
        "letmein123",
        "welcome123",
        "changeme123",
        "administrator",
        "qwerty1234",
        "qwerty12345",
    }
)


def password_problem(password: str) -> str | None:
    """What is wrong with a new password, or None."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"Password must be at least {MIN_PASSWORD_LENGTH} characters long"
    if len(password) > 1024:
        return "Password must be at most 1024 characters long"
    if len(set(password)) < MIN_DISTINCT_CHARACTERS:
        return (
            f"Password must contain at least {MIN_DISTINCT_CHARACTERS} different characters "
            "(not one character or a short pattern repeated)"
        )
    if password.lower() in COMMON_PASSWORDS:
        return "Password is one of the most common passwords; choose another"
    return None
