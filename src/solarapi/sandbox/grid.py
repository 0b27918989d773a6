"""The quarter-hour grid the simulators work on, and the UTC months they cache by."""

from __future__ import annotations

from datetime import UTC, datetime

QUARTER_S = 900


def grid_seconds(value: datetime, name: str) -> int:
    """Epoch seconds of an aware datetime on the 15-minute grid; ValueError otherwise."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime")
    seconds = value.astimezone(UTC).timestamp()
    if seconds % QUARTER_S != 0:
        raise ValueError(f"{name} must lie on the 15-minute grid; got {value.isoformat()}")
    return int(seconds)


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
