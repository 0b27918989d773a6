"""A report's calendar: the one time zone whose local days name its period, its file, its
`period_local` cells and its buckets.

The zone is the caller's `timezone` when given; else the systems' own zone when their clocks
agree over the whole period (compared by UTC offsets, not names: Europe/Amsterdam and
Europe/Berlin agree, Europe/Amsterdam and Europe/London do not); else the request is refused
(400) asking for `timezone`, because no one local calendar fits every system. It is resolved
once, at POST time, and stored in the report's parameters, so the file name never changes
afterwards (a system deleted or moved to another zone later changes nothing).

A system whose clock agrees with the report's zone over the report's range keeps its own
buckets, exactly those of `GET /systems/{id}/readings`; any other system is bucketed on the
report's zone (its 1 October is the report zone's 1 October).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import Interval, same_clock, widen_range

UTC_NAME = "UTC"


@dataclass(frozen=True, slots=True)
class LocalPeriod:
    """A report's period as local days: its first and last day (inclusive) in `zone`;
    `label` names the zone, with the systems' zones that share its clock
    ("Europe/Amsterdam = Europe/Berlin")."""

    first: date
    last: date
    zone: str
    label: str

    def text(self) -> str:
        return f"{self.first.isoformat()} to {self.last.isoformat()} ({self.label})"


def period_in(start: datetime, end: datetime, zone: str, label: str | None = None) -> LocalPeriod:
    """[start, end) as local days of `zone`: an October report (00:00 1 October to 00:00
    1 November local) is 2026-10-01 to 2026-10-31, not the UTC dates 2026-09-30 and
    2026-10-31."""
    tz = ZoneInfo(zone)
    local_start, local_end = start.astimezone(tz), end.astimezone(tz)
    last = local_end.date()
    if local_end.time() == datetime.min.time() and last > local_start.date():
        last -= timedelta(days=1)  # the end is exclusive: a midnight ends the day before
    return LocalPeriod(local_start.date(), last, zone, label or zone)


def local_period(start: datetime, end: datetime, zones: Iterable[str]) -> LocalPeriod:
    """The period on the calendar of systems in `zones` when no zone was chosen: theirs when
    their clocks agree over [start, end], else UTC (reports stored before `timezone`)."""
    names = tuple(sorted(set(zones)))
    if names and clocks_agree(names, start, end):
        return period_in(start, end, names[0], " = ".join(names))
    return period_in(start, end, UTC_NAME)


@functools.lru_cache(maxsize=256)
def clocks_agree(zones: tuple[str, ...], start: datetime, end: datetime) -> bool:
    """Whether every zone shows the same local time at every instant of [start, end]."""
    if len(zones) <= 1:
        return True
    return same_clock(
        [ZoneInfo(name) for name in zones], int(start.timestamp()), int(end.timestamp())
    )


def resolve_zone(zones: Iterable[str], timezone: str | None, start: datetime, end: datetime) -> str:
    """The report's zone (see the module's text); 400 when the systems' clocks disagree and
    no `timezone` was given."""
    if timezone is not None:
        return timezone
    names = tuple(sorted(set(zones)))
    if not names or clocks_agree(names, start, end):
        return names[0] if names else UTC_NAME
    groups = _clock_groups(names, start, end)
    raise ValidationFailed(
        "timezone is required: the report's systems are in time zones whose clocks differ "
        f"during the period ({'; '.join(' = '.join(group) for group in groups)}), so no one "
        "local calendar fits them all; choose the report's calendar with timezone, an IANA "
        f"name such as '{groups[0][0]}' or 'UTC'"
    )


def _clock_groups(names: tuple[str, ...], start: datetime, end: datetime) -> list[tuple[str, ...]]:
    """The zones, grouped by shared clock (for the message)."""
    groups: list[list[str]] = []
    for name in names:
        for group in groups:
            if clocks_agree((group[0], name), start, end):
                group.append(name)
                break
        else:
            groups.append([name])
    return [tuple(group) for group in groups]


@dataclass(frozen=True, slots=True)
class ReportCalendar:
    """The calendar a report is built on: its `zone`, the label that names it, and which
    zone each system's buckets follow."""

    zone: str
    label: str
    start: datetime
    end: datetime
    # The report's range widened to its zone's grid (epoch seconds), over which a system's
    # clock must agree with the zone for the system to keep its own buckets.
    lo: int
    hi: int

    @classmethod
    def of(
        cls,
        start: datetime,
        end: datetime,
        interval: Interval | None,
        timezone: str | None,
        system_zones: Iterable[str],
    ) -> ReportCalendar:
        zones = sorted(set(system_zones))
        if timezone is None:  # a report stored before `timezone`: the old rule
            timezone = local_period(start, end, zones).zone
        sharing = {
            timezone,
            *(z for z in zones if clocks_agree(tuple(sorted({z, timezone})), start, end)),
        }
        widened = widen_range(start, end, interval or Interval.DAY, ZoneInfo(timezone))
        return cls(
            timezone, " = ".join(sorted(sharing)), start, end, widened.start_s, widened.end_s
        )

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def period(self) -> LocalPeriod:
        return period_in(self.start, self.end, self.zone, self.label)

    def bucket_zone(self, system_zone: str) -> str:
        """The zone whose grid a system's buckets follow: its own when its clock is the
        report's over the whole (widened) range, else the report's."""
        if system_zone == self.zone or _same_clock(system_zone, self.zone, self.lo, self.hi):
            return system_zone
        return self.zone


@functools.lru_cache(maxsize=256)
def _same_clock(first: str, second: str, lo: int, hi: int) -> bool:
    return same_clock([ZoneInfo(first), ZoneInfo(second)], lo, hi)
