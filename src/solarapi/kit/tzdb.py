"""The one time-zone database every local calendar follows: the `tzdata` package pinned in
`uv.lock`, never the host's files.

`ZoneInfo(name)` looks in the host's TZPATH (`/usr/share/zoneinfo`, …) first and falls back to
the `tzdata` package only when the name is not there, so two servers on hosts with different
tz releases answered the same request differently (the host here had 2025b, the lock 2026f:
America/Vancouver's 2026-11-01 was a 25-hour day with 100 expected samples instead of 24 h and
96). `use_shipped_database` empties TZPATH for the whole process, so every `ZoneInfo` — ours,
pandas', pvlib's — reads the package's files. `solarapi/__init__.py` calls it when the package
is imported, before any zone is built.
"""

from __future__ import annotations

import zoneinfo

import tzdata

# The IANA release the package carries ("2026f"): `/health` reports it as `tzdata`.
TZDATA_VERSION: str = tzdata.IANA_VERSION


def use_shipped_database() -> None:
    """Make every `ZoneInfo` of this process come from the `tzdata` package."""
    if zoneinfo.TZPATH:
        zoneinfo.reset_tzpath(to=())
    # Zones built before (a module imported ahead of solarapi) came from the host's files;
    # dropped from the cache, so the same name is loaded again from the package.
    zoneinfo.ZoneInfo.clear_cache()
