"""The ingest token format: `ik_` + 32 random base62 + the 6-character CRC32 checksum of
API keys (contract section 2), so scanners and this server reject a mistyped token offline."""

from __future__ import annotations

import hmac
import re
import secrets

from solarapi.auth.keys import BASE62, checksum, hash_key

TOKEN_PATTERN = re.compile(r"^ik_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$")
PREFIX = "ik_"
_RANDOM_LENGTH = 32


def generate_token() -> str:
    random_part = "".join(secrets.choice(BASE62) for _ in range(_RANDOM_LENGTH))
    return f"{PREFIX}{random_part}{checksum(random_part)}"


def well_formed(token: str) -> bool:
    """Prefix, length, alphabet and checksum: everything that needs no database."""
    match = TOKEN_PATTERN.match(token)
    return match is not None and hmac.compare_digest(checksum(match.group(1)), match.group(2))


def display_form(token: str) -> str:
    """`ik_Ab12…wxyz`: enough to recognise a token, useless to an attacker."""
    return f"{token[:7]}…{token[-4:]}"


def hash_token(token: str, secret: bytes) -> str:
    """The stored HMAC-SHA256, as for API keys (the `ik_` prefix keeps the two apart)."""
    return hash_key(token, secret)
