"""Text from clients: the NUL rule and how error messages quote what was sent.

- No string of the API holds U+0000: PostgreSQL cannot store it in `text` or `jsonb`, so a
  NUL that reached the database would be a 500 there and a stored value on SQLite. It is
  refused at the edge — in the URL, the query and JSON bodies by the gateway, in dashboard
  forms by `read_form` — before anything is read or written.
- An error message quotes input through `excerpt`, which keeps a short prefix: a 65 kB name
  must not come back in full (nor fill the logs that record messages).
"""

from __future__ import annotations

import re

QUOTE_LIMIT = 64
NUL_MESSAGE = "strings must not contain the NUL character (U+0000)"

_PERCENT_NUL = b"%00"
# A JSON `\u0000` escape: a backslash-u that is not itself escaped, i.e. after an even run
# (possibly none) of backslashes. Hex digits of zero have no case.
_ESCAPED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_ESCAPE_PREFIXES = (b"\\u000", b"\\u00", b"\\u0", b"\\u", b"\\")


def excerpt(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`value` as an error message quotes it: whole when short, else its first `limit`
    characters and an ellipsis."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


def url_has_nul(path: str, query_string: bytes) -> bool:
    """`path` is already percent-decoded (by the server); the query string is raw bytes, where
    a NUL can only be `%00` (`%2500` is the text "%00")."""
    # `bytes.find`, not `in`: CPython 3.11's `bytes.__contains__` first tries its operand as
    # an integer and formats the TypeError that raises (~2k instructions a test).
    return "\x00" in path or query_string.find(_PERCENT_NUL) >= 0 or query_string.find(b"\x00") >= 0


class JsonNulScanner:
    """Finds U+0000 in a JSON text fed chunk by chunk: a raw NUL byte, or a `\\u0000` escape
    anywhere, also one split across chunks. A NUL is the only way to write U+0000 in JSON,
    and outside strings a backslash is a syntax error anyway, so this needs no parsing."""

    __slots__ = ("_carry",)

    def __init__(self) -> None:
        # The end of the text seen so far that a later chunk could complete into an escape:
        # an odd or even run of backslashes (kept as its parity) and the start of `\u0000`.
        self._carry = b""

    def feed(self, chunk: bytes) -> bool:
        """True when the text so far holds a NUL."""
        if b"\x00" in chunk:
            return True
        text = self._carry + chunk if self._carry else chunk
        if b"u0000" in text and _ESCAPED_NUL.search(text) is not None:
            return True
        self._carry = self._pending(text)
        return False

    @staticmethod
    def _pending(text: bytes) -> bytes:
        if b"\\" not in text[-5:]:
            return b""
        for prefix in _ESCAPE_PREFIXES:
            if text.endswith(prefix):
                before = text[: len(text) - len(prefix)]
                run = len(before) - len(before.rstrip(b"\\"))
                # An odd run before the prefix escapes its backslash: no escape pending.
                return b"" if run % 2 else prefix
        return b""


def energy_text(wh: float) -> str:
    """An energy in Wh for a message, exact to the API's 3 decimals and readable:
    `100,000,000`, `12,345,678.9` (`:g` wrote `1e+08` and `1.23457e+07`, hiding the digits
    a user compares)."""
    return f"{wh:,.3f}".rstrip("0").rstrip(".")
