"""Time series longer than one request allows (10,000 buckets): the range is asked for in
pieces that end on bucket boundaries, so each bucket is in exactly one piece and the pieces'
totals add up to the whole range's."""

from __future__ import annotations

from datetime import datetime, timedelta

from solarapi_client import errors

# Fewer buckets per piece than the API's 10,000: a local-clock bucket cut by an offset change
# is shorter than its interval, so a piece may hold a few more buckets than its length says.
BUCKETS_PER_PIECE = 9_000
# The shortest a bucket of each interval can be (a DST day is 23 hours, February 28 days).
_SHORTEST = {
    "15m": timedelta(minutes=15),
    "30m": timedelta(minutes=15),
    "1h": timedelta(minutes=30),
    "1d": timedelta(hours=23),
    "1w": timedelta(days=6, hours=23),
    "1M": timedelta(days=27),
}


# How long a bucket of each interval is, at least, over a long range (a month: 28 days): how
# many buckets a range holds, within a few (the local-clock cuts `_SHORTEST` allows for).
NOMINAL_S = {"15m": 900, "30m": 1800, "1h": 3600, "1d": 86_400, "1w": 604_800,
             "1M": 2_419_200}  # fmt: skip


def as_datetime(value: datetime | str, name: str) -> datetime:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        raise errors.SolarApiError(f"{name} must carry a time zone (UTC or an offset)")
    return moment


def piece_end(cursor: datetime, stop: datetime, interval: str) -> datetime:
    """Where the piece starting at `cursor` asks to end; the API widens it up to a bucket
    boundary, which the next piece starts from."""
    try:
        shortest = _SHORTEST[interval]
    except KeyError:
        raise errors.SolarApiError(
            f"interval must be one of {', '.join(_SHORTEST)}; got {interval!r}"
        ) from None
    return min(stop, cursor + shortest * BUCKETS_PER_PIECE)


def next_cursor(cursor: datetime, widened_to: datetime) -> datetime:
    if widened_to <= cursor:  # never loop on a piece that did not move forward
        raise errors.SolarApiError(f"the API answered a range ending at {widened_to}")
    return widened_to
