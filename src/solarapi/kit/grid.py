"""The bucket grid: the one module that knows where time-series buckets start and end.

`15m`, `30m` and `1h` buckets align to the UTC epoch. `1d`, `1w` (ISO weeks, from Monday) and
`1M` follow a local calendar (a system's or a price zone's IANA time zone), so a day is 23 or
25 hours on DST changes and a Sydney day is not a UTC day. All instants here are integer epoch
seconds (UTC); calendar edges are the UTC instants of local midnights.

It also owns the request rules every time-series endpoint shares: the interval parameter,
the `from`/`to` defaults, widening to the grid and the 10,000-bucket cap.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from solarapi.errors import ValidationFailed
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import TimestampError, format_timestamp, parse_timestamp

QUARTER_S = 900
MAX_BUCKETS = 10_000
DEFAULT_SPAN = timedelta(hours=24)
# Solar readings before the epoch or centuries ahead are typos; bounding the range also keeps
# calendar arithmetic far from datetime's year limits.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Interval(enum.StrEnum):
    MIN15 = "15m"
    MIN30 = "30m"
    HOUR = "1h"
    DAY = "1d"
    WEEK = "1w"
    MONTH = "1M"

    @property
    def fixed_seconds(self) -> int | None:
        """Length of a UTC-grid bucket; None for local-calendar intervals."""
        return _FIXED.get(self)

    @property
    def is_calendar(self) -> bool:
        return self not in _FIXED

    @property
    def label(self) -> str:
        """The bucket in words, for titles: "Energy per day"."""
        return INTERVAL_LABELS[self.value]


_FIXED: dict[Interval, int] = {Interval.MIN15: 900, Interval.MIN30: 1800, Interval.HOUR: 3600}
ALL_INTERVALS: tuple[Interval, ...] = tuple(Interval)
INTERVAL_LABELS: dict[str, str] = {
    "15m": "15 minutes",
    "30m": "30 minutes",
    "1h": "hour",
    "1d": "day",
    "1w": "week",
    "1M": "month",
}


def parse_interval(
    text: str | None,
    allowed: Sequence[Interval] = ALL_INTERVALS,
    default: Interval = Interval.HOUR,
) -> Interval:
    """The `interval` query parameter; anything outside `allowed` → 400 naming them."""
    if text is None or text == "":
        return default
    for interval in allowed:
        if text == interval.value:
            return interval
    names = ", ".join(interval.value for interval in allowed)
    raise ValidationFailed(f"interval must be one of {names}; got '{excerpt(text)}'")


# --- the local calendar -------------------------------------------------------------------


def local_date(instant_s: int, tz: ZoneInfo) -> date:
    return datetime.fromtimestamp(instant_s, tz).date()


def local_midnight(day: date, tz: ZoneInfo) -> int:
    """UTC epoch seconds of 00:00 local time on `day` (fold 0 when midnight repeats; the
    transition instant when midnight is skipped)."""
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())


def _period_start(day: date, interval: Interval) -> date:
    if interval is Interval.DAY:
        return day
    if interval is Interval.WEEK:
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def _add_periods(day: date, count: int, interval: Interval) -> date:
    if interval is Interval.DAY:
        return day + timedelta(days=count)
    if interval is Interval.WEEK:
        return day + timedelta(days=7 * count)
    months = day.year * 12 + day.month - 1 + count
    return date(months // 12, months % 12 + 1, 1)


def _periods_between(first: date, last: date, interval: Interval) -> int:
    if interval is Interval.DAY:
        return (last - first).days
    if interval is Interval.WEEK:
        return (last - first).days // 7
    return (last.year - first.year) * 12 + last.month - first.month


# --- the grid -------------------------------------------------------------------------------


def floor_to_grid(instant_s: int, interval: Interval, tz: ZoneInfo) -> int:
    """Start of the bucket that contains `instant_s`."""
    step = interval.fixed_seconds
    if step is not None:
        return instant_s - instant_s % step
    return local_midnight(_period_start(local_date(instant_s, tz), interval), tz)


def ceil_to_grid(instant_s: int, interval: Interval, tz: ZoneInfo) -> int:
    """`instant_s` itself when it is a bucket edge, else the end of its bucket."""
    start = floor_to_grid(instant_s, interval, tz)
    if start == instant_s:
        return start
    return nth_edge(start, 1, interval, tz)


def nth_edge(edge_s: int, count: int, interval: Interval, tz: ZoneInfo) -> int:
    """The edge `count` buckets after the edge `edge_s`."""
    step = interval.fixed_seconds
    if step is not None:
        return edge_s + count * step
    first = _period_start(local_date(edge_s, tz), interval)
    return local_midnight(_add_periods(first, count, interval), tz)


def bucket_count(start_s: int, end_s: int, interval: Interval, tz: ZoneInfo) -> int:
    """Buckets between two edges, without building them (ranges can be absurdly long)."""
    step = interval.fixed_seconds
    if step is not None:
        return (end_s - start_s) // step
    first = _period_start(local_date(start_s, tz), interval)
    last = _period_start(local_date(end_s, tz), interval)
    return _periods_between(first, last, interval)


def bucket_edges(start_s: int, end_s: int, interval: Interval, tz: ZoneInfo) -> IntArray:
    """Edges e0 < e1 < … < en of the buckets that tile [start_s, end_s) widened to the grid;
    bucket i is [e_i, e_(i+1))."""
    first = floor_to_grid(start_s, interval, tz)
    last = ceil_to_grid(end_s, interval, tz)
    step = interval.fixed_seconds
    if step is not None:
        return np.arange(first, last + 1, step, dtype=np.int64)
    return _calendar_edges(first, last, interval, tz)


@functools.lru_cache(maxsize=512)
def _calendar_edges(first: int, last: int, interval: Interval, tz: ZoneInfo) -> IntArray:
    # Cached: a year of local midnights costs ~1 ms to compute, and dashboards and clients
    # ask for the same ranges again and again. The array is shared, so read-only.
    day = _period_start(local_date(first, tz), interval)
    count = bucket_count(first, last, interval, tz)
    edges = np.array(
        [local_midnight(_add_periods(day, i, interval), tz) for i in range(count + 1)],
        dtype=np.int64,
    )
    edges.flags.writeable = False
    return edges


# --- the request rules ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A request's range, widened to the grid: [start_s, end_s), both bucket edges."""

    start_s: int
    end_s: int
    interval: Interval
    tz: ZoneInfo

    def edges(self) -> IntArray:
        return bucket_edges(self.start_s, self.end_s, self.interval, self.tz)


def _parse_param(name: str, text: str) -> datetime:
    try:
        value = parse_timestamp(text)
    except TimestampError as exc:
        raise ValidationFailed(f"{name}: {exc}") from None
    if not EARLIEST <= value < LATEST:
        raise ValidationFailed(
            f"{name}: must lie between {format_timestamp(EARLIEST)} and "
            f"{format_timestamp(LATEST)}; got '{excerpt(text)}'"
        )
    return value


def parse_range(
    from_text: str | None, to_text: str | None, now: datetime
) -> tuple[datetime, datetime]:
    """`from`/`to` query parameters with the contract's defaults: `to` = now,
    `from` = `to` − 24 h. Zone-less or malformed timestamps → 400 naming the parameter."""
    end = _parse_param("to", to_text) if to_text else now
    start = _parse_param("from", from_text) if from_text else end - DEFAULT_SPAN
    return start, end


def widen_range(start: datetime, end: datetime, interval: Interval, tz: ZoneInfo) -> TimeRange:
    """[start, end) widened to the grid (`start` down, `end` up), checked against the cap."""
    if start >= end:
        raise ValidationFailed(
            f"'from' must be before 'to'; got from={format_timestamp(start)} "
            f"and to={format_timestamp(end)}"
        )
    if start < EARLIEST or end > LATEST:
        raise ValidationFailed(
            f"the range must lie between {format_timestamp(EARLIEST)} and "
            f"{format_timestamp(LATEST)}"
        )
    start_s = floor_to_grid(_floor_seconds(start), interval, tz)
    end_s = ceil_to_grid(_ceil_seconds(end), interval, tz)
    count = bucket_count(start_s, end_s, interval, tz)
    if count > MAX_BUCKETS:
        largest = nth_edge(start_s, MAX_BUCKETS, interval, tz)
        raise ValidationFailed(
            f"the range holds {count:,} buckets of {interval.value}, more than the "
            f"{MAX_BUCKETS:,} allowed per request; for from={format_timestamp(_utc(start_s))} "
            f"the largest allowed 'to' is {format_timestamp(_utc(largest))} "
            f"(or choose a coarser interval)"
        )
    return TimeRange(start_s, end_s, interval, tz)


def _floor_seconds(value: datetime) -> int:
    return int(value.timestamp() // 1)


def _ceil_seconds(value: datetime) -> int:
    whole = _floor_seconds(value)
    return whole + 1 if value.microsecond else whole


def _utc(instant_s: int) -> datetime:
    return datetime.fromtimestamp(instant_s, UTC)


# --- aggregation into buckets ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Buckets:
    """Per-bucket totals. `energy_wh` is NaN where a bucket has no sample (a gap, never 0);
    `power_max_w` is NaN where no sample reported a power."""

    edges: IntArray
    energy_wh: FloatArray
    samples: IntArray
    power_max_w: FloatArray


def aggregate_into(
    edges: IntArray,
    starts: IntArray,
    energy_wh: FloatArray,
    samples: IntArray,
    power_max_w: FloatArray,
) -> Buckets:
    """Sum rows (each covering [start, start + its length), wholly inside one bucket) into
    the buckets given by `edges`. Rows with NaN energy are gaps and count as no sample; rows
    outside the edges are ignored."""
    count = len(edges) - 1
    # Bucket i holds the starts in [edges[i], edges[i + 1]); before the first edge → -1,
    # at or after the last → count: both dropped, as are gaps.
    index = np.searchsorted(edges, starts, side="right") - 1
    keep = (index >= 0) & (index < count) & ~np.isnan(energy_wh)
    index = index[keep]
    # (float already, unless nothing is kept: then bincount answers in integers)
    energy = np.bincount(index, weights=energy_wh[keep], minlength=count).astype(
        np.float64, copy=False
    )
    sample_count = np.bincount(index, weights=samples[keep], minlength=count).astype(np.int64)
    energy[sample_count == 0] = np.nan
    # fmax skips NaN (no power reported): a bucket stays NaN only if no row reported one.
    power_max = np.full(count, np.nan)
    np.fmax.at(power_max, index, power_max_w[keep])
    return Buckets(edges, energy, sample_count, power_max)


def iso_strings(instants: IntArray) -> list[str]:
    """Vectorised `format_timestamp` for many epoch seconds: `2025-06-15T12:00:00Z`."""
    return list(
        np.datetime_as_string(instants.astype("datetime64[s]"), unit="s", timezone="UTC").tolist()
    )
