"""RFC 3339 parsing and formatting: the one time parser of the API.

Requests must carry a zone (`Z` or an offset); a naive timestamp is refused because guessing
a zone is the classic cause of shifted solar data.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import numpy as np
import numpy.typing as npt

from solarapi.kit.text import excerpt

# ASCII digits only (`\d` alone also matches Arabic-Indic and other digits, which int() and
# fromisoformat then read), the whole text (no surrounding whitespace: RFC 3339 has none).
_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)"
    r"(?P<zone>[Zz]|[+-]\d{2}:\d{2})?",
    re.ASCII,
)
_FAST_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)


class TimestampError(ValueError):
    """A timestamp that is not RFC 3339 with a zone."""


def parse_timestamp(text: str) -> datetime:
    """Parse RFC 3339 with `Z` or a numeric offset and return an aware UTC datetime."""
    if len(text) == 20 and _FAST_UTC.fullmatch(text) is not None:
        # `YYYY-MM-DDTHH:MM:SSZ`, the form nearly every client sends: fromisoformat reads it
        # as it is (UTC already, as below), a third of the general way's cost (every
        # time-series request has two). An impossible date takes the way below for its error.
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise TimestampError(
            f"'{excerpt(text)}' is not an RFC 3339 timestamp such as 2025-06-15T12:00:00Z"
        )
    if match.group("zone") is None:
        raise TimestampError(
            f"'{excerpt(text)}' has no time zone; add 'Z' for UTC or an offset such as '+02:00'"
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
    except ValueError:
        # Not fromisoformat's own words ("Invalid isoformat string: …", "day is out of range
        # for month"): they name Python, not the rule.
        raise TimestampError(
            f"'{excerpt(text)}' is not a valid date and time: the month must be 01–12, the "
            "day exist in that month, the hour be 00–23, minutes and seconds 00–59, and an "
            "offset at most ±23:59"
        ) from None
    try:
        value = value.astimezone(UTC)
        if frac[6:].strip("0"):
            # Finer than a microsecond: rounded up, never down, so 12:00:00.0000001 is not
            # taken for the whole second 12:00:00 (was: truncated, and passed as aligned).
            value += timedelta(microseconds=1)
        return value
    except OverflowError:
        # 0001-01-01T00:00:00+14:00 is a valid text for an instant before year 1.
        raise TimestampError(
            f"'{excerpt(text)}' lies outside the years 1–9999 once converted to UTC"
        ) from None


def epoch_seconds(text: str, midnights: dict[str, int]) -> int | None:
    """Epoch seconds of `YYYY-MM-DDTHH:MM:SSZ` (the form nearly every client sends) without
    building a datetime per item, `midnights` caching each day's start; None for any other
    form, which takes `parse_timestamp`. The fast path of the same parser: a bulk upload
    parses 10,000 of these per request."""
    if len(text) != 20 or _FAST_UTC.fullmatch(text) is None:
        return None
    midnight = midnights.get(text[:10])
    if midnight is None:
        try:
            day = date.fromisoformat(text[:10])
        except ValueError:
            return None
        midnight = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
        midnights[text[:10]] = midnight
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if hour > 23 or minute > 59 or second > 59:
        return None
    return midnight + hour * 3600 + minute * 60 + second


# Where a `YYYY-MM-DDTHH:MM:SSZ` text has its separators, and its digits.
_SEPARATORS = {4: ord("-"), 7: ord("-"), 10: ord("T"), 13: ord(":"), 16: ord(":"), 19: ord("Z")}
_DIGITS = [i for i in range(19) if i not in _SEPARATORS]
_POWERS = np.array([1000, 100, 10, 1])


def epoch_seconds_many(texts: list[str]) -> npt.NDArray[np.int64] | None:
    """`epoch_seconds` of every text at once, with numpy over the texts' bytes (no Python
    object per item): None unless every one is a valid `YYYY-MM-DDTHH:MM:SSZ`, and then the
    caller takes the item-by-item way, which finds and names the first that is not."""
    count = len(texts)
    if count == 0 or set(map(len, texts)) != {20}:
        return None
    try:
        raw = "".join(texts).encode("ascii")
    except UnicodeEncodeError:
        return None
    chars = np.frombuffer(raw, dtype=np.uint8).reshape(count, 20)
    for position, separator in _SEPARATORS.items():
        if not bool(np.all(chars[:, position] == separator)):
            return None
    digits = chars[:, _DIGITS].astype(np.int64) - ord("0")
    if not bool(np.all((digits >= 0) & (digits <= 9))):
        return None
    year = digits[:, 0:4] @ _POWERS
    month, day = digits[:, 4] * 10 + digits[:, 5], digits[:, 6] * 10 + digits[:, 7]
    hour, minute = digits[:, 8] * 10 + digits[:, 9], digits[:, 10] * 10 + digits[:, 11]
    second = digits[:, 12] * 10 + digits[:, 13]
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    valid = (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1)
    valid &= day <= month_days[np.clip(month, 0, 12)] + (leap & (month == 2))
    valid &= (hour <= 23) & (minute <= 59) & (second <= 59)
    if not bool(np.all(valid)):
        return None
    # Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    shifted = year - (month <= 2)
    era = shifted // 400
    year_of_era = shifted - era * 400
    day_of_year = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    seconds: npt.NDArray[np.int64] = days * 86400 + hour * 3600 + minute * 60 + second
    return seconds


def format_timestamp(value: datetime) -> str:
    """UTC, whole seconds, with `Z`: 2025-06-15T12:00:00Z."""
    if value.tzinfo is UTC and value.year >= 1000:
        # What the database layer hands back (aware UTC): isoformat is C, ~4× strftime's
        # cost less; years below 1000 would be zero-padded there and not by strftime.
        return value.isoformat(timespec="seconds")[:19] + "Z"
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
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text, re.ASCII):
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        raise TimestampError(f"'{excerpt(text)}' is not a date in the form YYYY-MM-DD") from None


def utcnow() -> datetime:
    return datetime.now(UTC)
