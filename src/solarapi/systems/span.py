"""Where a system's readings start and end, as the API shows them: stored quarter-hours for a
metered system, the simulated history for a simulated one."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from solarapi.kit.grid import QUARTER_S, local_midnight
from solarapi.kit.timefmt import format_timestamp, utcnow
from solarapi.models.systems import ReadableSystem

# Simulated readings exist from this instant on (earlier quarter-hours are "no reading"): it
# keeps one request's work finite, since 10,000 monthly buckets would otherwise ask for 833
# years of quarter-hours. A system's installation day moves its start later
# (`simulated_since`).
SIMULATION_START_S = 946_684_800  # 2000-01-01T00:00:00Z
_BEFORE_SIMULATION = date(1999, 12, 31)


def simulated_since(system: ReadableSystem) -> int:
    """Where a simulated system's readings start (epoch s): the local midnight of its
    `installed_on`, never before the simulated history's start (2000-01-01T00:00Z)."""
    return _simulated_since(system.installed_on, system.timezone)


def _simulated_since(installed_on: date | None, timezone: str) -> int:
    if installed_on is None or installed_on < _BEFORE_SIMULATION:
        # (any local midnight of that day lies before the start; and year 1 in a zone east
        # of UTC has no UTC instant at all)
        return SIMULATION_START_S
    return max(SIMULATION_START_S, local_midnight(installed_on, ZoneInfo(timezone)))


def simulated_span(
    installed_on: date | None, timezone: str, now: datetime | None = None
) -> tuple[str | None, str | None]:
    """`first_reading_at` / `last_reading_at` of a simulated system installed on
    `installed_on` in `timezone`: the starts of the first and last quarter-hours it serves
    (its history's start, and the last quarter-hour that has ended by `now`)."""
    first, last = _simulated_since(installed_on, timezone), _last_ended(now or utcnow())
    if last < first:
        return None, None
    return (
        format_timestamp(datetime.fromtimestamp(first, UTC)),
        format_timestamp(datetime.fromtimestamp(last, UTC)),
    )


def simulated_last_start(installed_on: date | None, timezone: str, now: datetime) -> int | None:
    """The start (epoch s) of the last quarter-hour a simulated system serves at `now`, as
    `simulated_span` gives it: the last one that has ended, whichever local day it belongs
    to; None before its history."""
    last = _last_ended(now)
    return None if last < _simulated_since(installed_on, timezone) else last


def _last_ended(now: datetime) -> int:
    """The start (epoch s) of the last quarter-hour that has ended by `now`."""
    now_s = int(now.timestamp())
    return now_s - now_s % QUARTER_S - QUARTER_S
