"""The quarter-hour grid the simulators work on, and the UTC months they cache by."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from solarapi.kit.grid import QUARTER_S
from solarapi.systems.span import SIMULATION_START_S as SIMULATION_START_S  # re-exported

FloatArray = npt.NDArray[np.float64]
# (year, month, month start, month end) → one value per quarter-hour of that UTC month.
MonthValues = Callable[[int, int, int, int], FloatArray]


def grid_seconds(value: datetime, name: str) -> int:
    """Epoch seconds of an aware datetime on the 15-minute grid; ValueError otherwise."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime")
    seconds = value.astimezone(UTC).timestamp()
    if seconds % QUARTER_S != 0:
        raise ValueError(f"{name} must lie on the 15-minute grid; got {value.isoformat()}")
    return int(seconds)


def grid_range(start: datetime, end: datetime) -> tuple[int, int]:
    """[start, end) as epoch seconds on the 15-minute grid; ValueError if misaligned or reversed."""
    start_s = grid_seconds(start, "start")
    end_s = grid_seconds(end, "end")
    if end_s < start_s:
        raise ValueError("end must not be before start")
    return start_s, end_s


def utc_months(start_s: int, end_s: int) -> list[tuple[int, int, int, int]]:
    """(month start, month end, year, month) of every UTC month overlapping [start_s, end_s)."""
    current = datetime.fromtimestamp(start_s, UTC).replace(day=1, hour=0, minute=0, second=0)
    months = []
    while int(current.timestamp()) < end_s:
        following = (
            current.replace(year=current.year + 1, month=1)
            if current.month == 12
            else current.replace(month=current.month + 1)
        )
        months.append(
            (int(current.timestamp()), int(following.timestamp()), current.year, current.month)
        )
        current = following
    return months


def gather_months(start_s: int, end_s: int, month_values: MonthValues) -> FloatArray:
    """The quarter-hour values of [start_s, end_s), cut from whole UTC months.

    Computing whole months only (and caching them) is what makes every range return exactly
    the slice of any larger range: numpy may round differently in the last bit for arrays of
    different lengths.
    """
    pieces: list[FloatArray] = []
    for month_start_s, month_end_s, year, month in utc_months(start_s, end_s):
        values = month_values(year, month, month_start_s, month_end_s)
        lo = (max(start_s, month_start_s) - month_start_s) // QUARTER_S
        hi = (min(end_s, month_end_s) - month_start_s) // QUARTER_S
        pieces.append(values[lo:hi])
    if not pieces:
        return np.zeros(0, dtype=np.float64)
    # A copy even for one month: the cached arrays are shared and read-only.
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0].copy()
