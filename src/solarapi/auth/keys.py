"""The API key format: `pk_{live|test}_` + 32 random base62 + 6-character CRC32 checksum.

The checksum (GitHub's scheme) lets secret scanners and this server reject a mistyped or
made-up key offline, without a database lookup.
"""

from __future__ import annotations

import hmac
import re
import secrets
import zlib
from dataclasses import dataclass

from solarapi.kit.plans import Environment

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
KEY_PATTERN = re.compile(r"^pk_(live|test)_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$")
_ENVIRONMENTS = {environment.value: environment for environment in Environment}
_RANDOM_LENGTH = 32
_CHECKSUM_LENGTH = 6


def base62(number: int, width: int) -> str:
    digits: list[str] = []
    while number:
        number, rest = divmod(number, 62)
        digits.append(BASE62[rest])
    return "".join(reversed(digits)).rjust(width, "0")


def checksum(random_part: str) -> str:
    return base62(zlib.crc32(random_part.encode("ascii")), _CHECKSUM_LENGTH)


@dataclass(frozen=True, slots=True)
class NewKey:
    key: str
    environment: Environment

    @property
    def display(self) -> str:
        return display_form(self.key)


def generate_key(environment: Environment) -> NewKey:
    random_part = "".join(secrets.choice(BASE62) for _ in range(_RANDOM_LENGTH))
    return NewKey(f"pk_{environment.value}_{random_part}{checksum(random_part)}", environment)


def parse_key(key: str) -> Environment | None:
    """The key's environment if it is well-formed with a valid checksum, else None."""
    match = KEY_PATTERN.match(key)
    if match is None:
        return None
    if not hmac.compare_digest(checksum(match.group(2)), match.group(3)):
        return None
    return _ENVIRONMENTS[match.group(1)]  # `Environment(...)`, without the enum's call


def display_form(key: str) -> str:
    """`pk_live_Ab12…wxyz`: enough to recognise a key, useless to an attacker."""
    return f"{key[:12]}…{key[-4:]}"


def hash_key(key: str, secret: bytes) -> str:
    # `hmac.new(secret, key, sha256).hexdigest()` in one call to OpenSSL, without the
    # `HMAC` object and its Python frames (every authenticated request's key).
    return hmac.digest(secret, key.encode("ascii"), "sha256").hex()
