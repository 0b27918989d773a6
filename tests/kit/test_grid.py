"""Property tests of the bucket grid: buckets tile the range with no gap or overlap, calendar
edges are local midnights, and energy is conserved between any two intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import (
    MAX_BUCKETS,
    QUARTER_S,
    Interval,
    aggregate_into,
    bucket_count,
    bucket_edges,
    ceil_to_grid,
    floor_to_grid,
    iso_strings,
    nth_edge,
    parse_interval,
    widen_range,
)

ZONES = [
    "UTC",
    "Europe/Amsterdam",
    "Australia/Sydney",
    "Australia/Adelaide",
    "Asia/Kolkata",
    "America/New_York",
    "Pacific/Chatham",  # +12:45 / +13:45
    "Australia/Lord_Howe",  # DST shifts by 30 minutes
    "America/Santiago",  # DST changes at midnight
]

zones = st.sampled_from(ZONES).map(ZoneInfo)
intervals = st.sampled_from(list(Interval))
instants = st.integers(
    min_value=int(datetime(1990, 1, 1, tzinfo=UTC).timestamp()),
    max_value=int(datetime(2090, 1, 1, tzinfo=UTC).timestamp()),
)


def _span_for(interval: Interval) -> st.SearchStrategy[int]:
    longest = {"15m": 30, "30m": 60, "1h": 120, "1d": 400, "1w": 1500, "1M": 4000}
    return st.integers(min_value=1, max_value=longest[interval.value] * 86400)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), tz=zones, interval=intervals, start=instants)
def test_buckets_tile_the_widened_range(
    data: st.DataObject, tz: ZoneInfo, interval: Interval, start: int
) -> None:
    end = start + data.draw(_span_for(interval))
    edges = bucket_edges(start, end, interval, tz)
    assert edges[0] <= start < edges[1]
    assert edges[-2] < end <= edges[-1]
    steps = np.diff(edges)
    assert (steps > 0).all()
    assert len(edges) - 1 == bucket_count(int(edges[0]), int(edges[-1]), interval, tz)
    for edge in edges[:: max(1, len(edges) // 20)].tolist():
        assert floor_to_grid(edge, interval, tz) == edge
        assert ceil_to_grid(edge, interval, tz) == edge
    assert nth_edge(int(edges[0]), len(edges) - 1, interval, tz) == edges[-1]
    # Every edge lies on the quarter-hour grid, so quarter-hours never straddle a bucket.
    assert (edges % QUARTER_S == 0).all()
    if interval.fixed_seconds:
        assert (steps == interval.fixed_seconds).all()
        assert (edges % interval.fixed_seconds == 0).all()
    else:
        # Local days are 23 to 25 hours (Lord Howe: 23.5 / 24.5).
        days = {"1d": 1, "1w": 7, "1M": 28}[interval.value]
        assert (steps >= days * 86400 - 3600).all()
        for edge in edges[:: max(1, len(edges) // 20)].tolist():
            local = datetime.fromtimestamp(edge, tz)
            assert (local.hour, local.minute) in ((0, 0), (1, 0))  # 01:00 if midnight skipped
            if interval is Interval.WEEK:
                assert local.weekday() == 0
            if interval is Interval.MONTH:
                assert local.day == 1


@settings(max_examples=200, deadline=None)
@given(
    tz=zones,
    first=intervals,
    second=intervals,
    start=instants,
    values=st.lists(
        st.one_of(st.none(), st.floats(min_value=0, max_value=5000)), min_size=1, max_size=800
    ),
    powers=st.lists(st.floats(min_value=0, max_value=9000), min_size=1, max_size=800),
)
def test_energy_is_conserved_between_intervals(
    tz: ZoneInfo,
    first: Interval,
    second: Interval,
    start: int,
    values: list[float | None],
    powers: list[float],
) -> None:
    start -= start % QUARTER_S
    starts = start + QUARTER_S * np.arange(len(values), dtype=np.int64)
    energy = np.array([np.nan if v is None else v for v in values])
    power = np.resize(np.array(powers), len(values))
    samples = np.ones(len(values), dtype=np.int64)
    end = int(starts[-1]) + QUARTER_S
    results = []
    for interval in (first, second):
        edges = bucket_edges(start, end, interval, tz)
        buckets = aggregate_into(edges, starts, energy, samples, power)
        results.append(buckets)
        filled = buckets.samples > 0
        assert np.isnan(buckets.energy_wh[~filled]).all()
        assert not np.isnan(buckets.energy_wh[filled]).any()
    known = ~np.isnan(energy)
    for buckets in results:
        assert int(buckets.samples.sum()) == int(known.sum())
        assert np.nansum(buckets.energy_wh) == pytest.approx(energy[known].sum(), abs=1e-6)
        if known.any():
            assert np.nanmax(buckets.power_max_w) == power[known].max()
        else:
            assert np.isnan(buckets.power_max_w).all()


def test_amsterdam_dst_days_by_hand() -> None:
    tz = ZoneInfo("Europe/Amsterdam")
    start = int(datetime(2025, 3, 29, 12, tzinfo=UTC).timestamp())
    edges = bucket_edges(start, start + 3 * 86400, Interval.DAY, tz)
    hours = (np.diff(edges) // 3600).tolist()
    assert hours == [24, 23, 24, 24]
    autumn = int(datetime(2025, 10, 26, 12, tzinfo=UTC).timestamp())
    assert (np.diff(bucket_edges(autumn, autumn + 1, Interval.DAY, tz)) // 3600).tolist() == [25]


def test_rows_outside_the_edges_are_ignored() -> None:
    edges = np.array([900, 1800], dtype=np.int64)
    starts = np.array([0, 900, 1800], dtype=np.int64)
    buckets = aggregate_into(
        edges, starts, np.array([5.0, 7.0, 11.0]), np.ones(3, np.int64), np.full(3, np.nan)
    )
    assert buckets.energy_wh.tolist() == [7.0]
    assert buckets.samples.tolist() == [1]
    assert np.isnan(buckets.power_max_w[0])


def test_parse_interval_messages() -> None:
    assert parse_interval(None) is Interval.HOUR
    assert parse_interval("1M") is Interval.MONTH
    with pytest.raises(ValidationFailed, match=r"one of 15m, 30m, 1h, 1d, 1w, 1M; got '1m'"):
        parse_interval("1m")
    with pytest.raises(ValidationFailed, match=r"one of 15m, 1h, 1d; got '30m'"):
        parse_interval("30m", allowed=(Interval.MIN15, Interval.HOUR, Interval.DAY))


def test_cap_names_the_largest_allowed_to() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    ok = widen_range(start, start + timedelta(hours=MAX_BUCKETS), Interval.HOUR, ZoneInfo("UTC"))
    assert (ok.end_s - ok.start_s) // 3600 == MAX_BUCKETS
    with pytest.raises(ValidationFailed, match=r"largest allowed 'to' is 2026-02-21T16:00:00Z"):
        widen_range(
            start, start + timedelta(hours=MAX_BUCKETS, seconds=1), Interval.HOUR, ZoneInfo("UTC")
        )


def test_iso_strings() -> None:
    assert iso_strings(np.array([0, 1750000000], dtype=np.int64)) == [
        "1970-01-01T00:00:00Z",
        "2025-06-15T15:06:40Z",
    ]
