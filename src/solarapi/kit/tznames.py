"""The time-zone names the API accepts: IANA names of the tz database, the same on every host.

`ZoneInfo(name)` opens a file under the host's TZPATH, so left to itself it accepts
host-dependent names (`localtime`, `posixrules`, `posix/…`, `right/…`) and turns a 300-character
name into an OS error (ENAMETOOLONG), once taken for a database outage. Names are checked
against the tz database's own list first; only a listed name is ever opened.
"""

from __future__ import annotations

import functools
from importlib.resources import files

from solarapi.kit.text import excerpt

MAX_NAME_LENGTH = 64


@functools.cache
def tz_database_names() -> frozenset[str]:
    """The canonical and backward names of the tz database, as the `tzdata` package lists
    them. `zoneinfo.available_timezones()` is this list plus whatever files the host's
    TZPATH holds (`localtime` on this one), so the host part is left out."""
    listing = files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in listing.splitlines() if line.strip())


def check_time_zone(name: str) -> str:
    """`name` when the tz database lists it, else ValueError with a short message."""
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"'{excerpt(name, 32)}' is not an IANA time zone: names are at most "
            f"{MAX_NAME_LENGTH} characters; use a name such as 'Europe/Amsterdam'"
        )
    if name not in tz_database_names():
        raise ValueError(
            f"unknown IANA time zone '{name}'; use a name of the tz database such as "
            "'Europe/Amsterdam'"
        )
    return name
