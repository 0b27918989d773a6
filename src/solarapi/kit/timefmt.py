"""RFC 3339 parsing and formatting: the one time parser of the API.

Requests must carry a zone (`Z` or an offset); a naive timestamp is refused because guessing
a zone is the classic cause of shifted solar data.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

_RFC3339 = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)"
    r"(?P<zone>[Zz]|[+-]\d{2}:\d{2})?$"
)


class TimestampError(ValueError):
    """A timestamp that is not RFC 3339 with a zone."""


def parse_timestamp(text: str) -> datetime:
    """Parse RFC 3339 with `Z` or a numeric offset and return an aware UTC datetime."""
    match = _RFC3339.match(text.strip())
    if match is None:
        raise TimestampError(f"'{text}' is not an RFC 3339 timestamp such as 2025-06-15T12:00:00Z")
    if match.group("zone") is None:
        raise TimestampError(
            f"'{text}' has no time zone; add 'Z' for UTC or an offset such as '+02:00'"
        )
    frac = ""
    time_part = match.group("time")
    if "." in time_part:
        time_part, frac = time_part.split(".", 1)
    zone = match.group("zone").upper()
    iso = f"{match.group('date')}T{time_part}{'.' + frac[:6].ljust(6, '0') if frac else ''}"
    iso += "+00:00" if zone == "Z" else zone
    try:
        value = datetime.fromisoformat(iso)
    except ValueError as exc:
        raise TimestampError(f"'{text}' is not a valid date and time: {exc}") from None
    return value.astimezone(UTC)


def format_timestamp(value: datetime) -> str:
    """UTC, whole seconds, with `Z`: 2025-06-15T12:00:00Z."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_optional(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def as_utc(value: datetime) -> datetime:
    """Treat a naive datetime (as SQLite returns them) as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_date(text: str) -> date:
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        raise TimestampError(f"'{text}' is not a date in the form YYYY-MM-DD") from None


def utcnow() -> datetime:
    return datetime.now(UTC)
