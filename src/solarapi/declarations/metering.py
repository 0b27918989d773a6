"""What the readings say about a declaration's period, and the rules a period and a declared
energy must meet. The energy comes from the readings code itself (one source of truth)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import Interval, local_midnight
from solarapi.kit.text import energy_text
from solarapi.models.declarations import DeclarationType
from solarapi.models.systems import System
from solarapi.readings.service import aggregate

# Below this fraction of expected quarter-hours with a reading, a declaration cannot be
# submitted: the statement would rest on too much missing data.
MIN_SUBMIT_COVERAGE = 0.95
# Bounds the work of one request (and keeps calendar arithmetic far from datetime's limits);
# a longer statement is split into several declarations.
MAX_PERIOD_DAYS = 366
EARLIEST_DAY = date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Metering:
    """What the readings say about a period."""

    energy_wh: float | None  # None: not a single reading in the period
    samples: int
    expected_samples: int

    @property
    def coverage(self) -> float:
        # Rounded down to 3 decimals, so the shown value never reads 0.95 while submit
        # refuses it for being below 0.95.
        if self.expected_samples == 0:
            return 0.0
        return (self.samples * 1000 // self.expected_samples) / 1000


def period_bounds(system: System, period_start: date, period_end: date) -> tuple[int, int]:
    """UTC epoch seconds [start, end) of the local days period_start..period_end (inclusive)."""
    tz = ZoneInfo(system.timezone)
    return local_midnight(period_start, tz), local_midnight(period_end + timedelta(days=1), tz)


async def measure_period(
    session: AsyncSession, system: System, period_start: date, period_end: date, now: datetime
) -> Metering:
    """Metered energy and coverage of the period, computed by the readings code exactly as
    `GET /systems/{id}/readings?interval=1d` computes its `meta.totals` for the same local
    days — one source of truth, so the two numbers can never disagree."""

    start_s, end_s = period_bounds(system, period_start, period_end)
    readings = await aggregate(
        session,
        system,
        datetime.fromtimestamp(start_s, UTC),
        datetime.fromtimestamp(end_s, UTC),
        Interval.DAY,
        now,
    )
    totals = readings.totals
    return Metering(totals.energy_wh, totals.samples, totals.expected_samples)


def local_today(system: System, now: datetime) -> date:
    return now.astimezone(ZoneInfo(system.timezone)).date()


def validate_period(system: System, period_start: date, period_end: date, now: datetime) -> None:
    if period_start > period_end:
        raise ValidationFailed(
            f"period_start ({period_start.isoformat()}) must not be after period_end "
            f"({period_end.isoformat()})"
        )
    if period_start < EARLIEST_DAY:
        raise ValidationFailed(
            f"period_start must not be before {EARLIEST_DAY.isoformat()}; "
            f"got {period_start.isoformat()}"
        )
    days = (period_end - period_start).days + 1
    if days > MAX_PERIOD_DAYS:
        raise ValidationFailed(
            f"the period spans {days} days, more than the {MAX_PERIOD_DAYS} allowed; split it "
            "into several declarations"
        )
    start_s, end_s = period_bounds(system, period_start, period_end)
    if start_s == end_s:
        # Pacific/Apia skipped 2011-12-30 when it moved across the date line: such a period
        # has no quarter-hour at all (was: "'from' must be before 'to'").
        period = (
            period_start.isoformat()
            if period_start == period_end
            else f"{period_start.isoformat()} to {period_end.isoformat()}"
        )
        raise ValidationFailed(
            f"the period {period} has no day in the system's time zone {system.timezone}: "
            "the zone skipped those dates when it changed its UTC offset; choose a period "
            "with at least one day that exists there"
        )
    today = local_today(system, now)
    if period_end >= today:
        raise ValidationFailed(
            f"period_end must be before today ({today.isoformat()} in the system's time zone "
            f"{system.timezone}): a declaration covers whole past days only; "
            f"got {period_end.isoformat()}"
        )


def validate_energy(
    energy_wh: float | None, metered_energy_wh: float | None, declaration_type: DeclarationType
) -> None:
    if energy_wh is None:
        return
    if metered_energy_wh is None:
        if energy_wh > 0:
            raise ValidationFailed(
                f"energy_wh ({energy_text(energy_wh)}) exceeds the metered energy of the period, which "
                "has no readings yet; leave energy_wh out (it follows the metered energy) or "
                "upload the readings first"
            )
        return
    if energy_wh > metered_energy_wh:
        raise ValidationFailed(
            f"energy_wh ({energy_text(energy_wh)}) exceeds the metered energy of the period "
            f"({energy_text(metered_energy_wh)} Wh); a {declaration_type} declaration may state at "
            f"most what was metered"
        )
