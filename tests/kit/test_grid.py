"""Property tests of the bucket grid: buckets tile the range with no gap or overlap, calendar
edges are local midnights, and energy is conserved between any two intervals."""

from __future__ import annotations

import math
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.errors import ValidationFailed
from solarapi.kit import grid
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
    "Asia/Kathmandu",  # +5:45
    "Australia/Eucla",  # +8:45
    "Asia/Tehran",  # +3:30, DST until 2022
    "America/St_Johns",  # −3:30 / −2:30
    "Pacific/Apia",  # skipped 2011-12-30
]

WHOLE_HOUR_ZONES = {"UTC", "Europe/Amsterdam", "Australia/Sydney", "America/New_York"}

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
        # On the local clock: a bucket is at most one step long; shorter only where the
        # offset changed inside it (checked edge by edge against the reference below).
        assert (steps <= interval.fixed_seconds).all()
        if tz.key in WHOLE_HOUR_ZONES:
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


@pytest.mark.parametrize(
    ("zone", "since"),
    [("Pacific/Apia", date(1999, 1, 1)), ("Pacific/Kiritimati", date(1980, 1, 1))],
)
def test_the_largest_to_of_local_days_over_a_skipped_day_is_accepted(
    zone: str, since: date
) -> None:
    """A range of local days over the cap that holds a day that never existed there: the
    refusal names the `to` of 10,000 real days, and that `to` is accepted with 10,000
    buckets (it was refused as 10,001 calendar days, naming itself again)."""
    tz = ZoneInfo(zone)
    start = datetime(since.year, since.month, since.day, tzinfo=tz)
    with pytest.raises(grid.TooManyBuckets) as refused:
        widen_range(start, start + timedelta(days=20_000), Interval.DAY, tz)
    largest = datetime.fromtimestamp(refused.value.largest_to_s, UTC)
    fits = widen_range(start, largest, Interval.DAY, tz)
    assert len(fits.edges()) - 1 == MAX_BUCKETS
    assert bucket_count(fits.start_s, fits.end_s, Interval.DAY, tz) == MAX_BUCKETS
    # 10,001 calendar days: one of them has no bucket.
    assert (largest.astimezone(tz).date() - since).days == MAX_BUCKETS + 1
    with pytest.raises(
        grid.TooManyBuckets, match=f"largest allowed 'to' is {largest:%Y-%m-%dT%H:%M:%SZ}"
    ):
        widen_range(start, largest + timedelta(seconds=1), Interval.DAY, tz)


def test_iso_strings() -> None:
    assert iso_strings(np.array([0, 1750000000], dtype=np.int64)) == [
        "1970-01-01T00:00:00Z",
        "2025-06-15T15:06:40Z",
    ]


# --- the local clock, against a reference computed quarter-hour by quarter-hour --------------

_REFERENCE_ZONES = [
    *ZONES,
    "Africa/Monrovia",  # −0:44:30 until 1972: local midnight off the quarter-hour grid
    "Pacific/Kiritimati",  # −10:40 until 1979, then skipped a day to +14
    "Africa/Casablanca",  # Ramadan offset changes
    "Australia/Darwin",
]


def _label(quarter_s: int, interval: Interval, tz: ZoneInfo) -> object:
    """The contract's label of the quarter-hour starting at `quarter_s`, the slow way."""
    local = datetime.fromtimestamp(quarter_s, tz)
    step = interval.fixed_seconds
    if step is not None:
        seconds = local.hour * 3600 + local.minute * 60 + local.second
        return (local.date(), seconds - seconds % step, local.utcoffset())
    if interval is Interval.DAY:
        return local.date()
    if interval is Interval.WEEK:
        return local.isocalendar()[:2]
    return (local.year, local.month)


def _reference_edges(lo: int, hi: int, interval: Interval, tz: ZoneInfo) -> list[int]:
    """Quarter-hours in [lo, hi] whose label differs from the quarter-hour before's."""
    return [
        q
        for q in range(lo, hi + 1, QUARTER_S)
        if _label(q, interval, tz) != _label(q - QUARTER_S, interval, tz)
    ]


_NEAR_CHANGES = st.sampled_from(
    [
        int(datetime(*moment, tzinfo=UTC).timestamp())
        for moment in (
            (1971, 6, 1),
            (1972, 1, 6),  # Monrovia to UTC
            (1979, 9, 30),  # Kiritimati
            (1994, 12, 31),  # Kiritimati skips 1994-12-31
            (2011, 12, 29),  # Apia skips 2011-12-30
            (2025, 4, 5),  # Lord Howe, Sydney, Chatham, Santiago autumn
            (2025, 10, 4),  # their spring
            (2025, 10, 26),  # Europe's autumn
            (2025, 3, 30),
            (2022, 3, 21),  # Tehran
            (2026, 2, 15),  # Casablanca's Ramadan change
        )
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    tz=st.sampled_from(_REFERENCE_ZONES).map(ZoneInfo),
    interval=st.sampled_from([Interval.MIN15, Interval.MIN30, Interval.HOUR, Interval.DAY]),
    near=_NEAR_CHANGES,
    shift=st.integers(min_value=-3 * 86400, max_value=3 * 86400),
    span=st.integers(min_value=1, max_value=3 * 86400),
)
def test_edges_are_where_the_local_label_changes(
    tz: ZoneInfo, interval: Interval, near: int, shift: int, span: int
) -> None:
    """The grid's edges are exactly the quarter-hours where the local label changes (the
    contract's definition, computed one quarter-hour at a time), around real offset changes."""
    start = near + shift
    edges = bucket_edges(start, start + span, interval, tz)
    assert edges.tolist() == _reference_edges(int(edges[0]), int(edges[-1]), interval, tz)
    assert edges[0] <= start < edges[1]
    assert edges[-2] < start + span <= edges[-1]


def _local_edges(tz_name: str, first: str, last: str, interval: Interval) -> list[str]:
    tz = ZoneInfo(tz_name)
    lo = int(datetime.fromisoformat(first).timestamp())
    hi = int(datetime.fromisoformat(last).timestamp())
    return [
        datetime.fromtimestamp(edge, tz).isoformat()
        for edge in bucket_edges(lo, hi, interval, tz).tolist()
    ]


def test_kolkata_hours_follow_the_local_clock() -> None:
    edges = _local_edges(
        "Asia/Kolkata", "2026-06-01T00:00+05:30", "2026-06-02T00:00+05:30", Interval.HOUR
    )
    assert len(edges) == 25  # 24 buckets 00:00–24:00 IST, not 25 from 23:30
    assert edges[12:14] == ["2026-06-01T12:00:00+05:30", "2026-06-01T13:00:00+05:30"]


def test_kathmandu_hours_start_at_quarter_past_utc() -> None:
    tz = ZoneInfo("Asia/Kathmandu")
    start = int(datetime(2026, 6, 1, 6, tzinfo=UTC).timestamp())
    edges = bucket_edges(start, start + 3600, Interval.HOUR, tz)
    assert iso_strings(edges) == [
        "2026-06-01T05:15:00Z",
        "2026-06-01T06:15:00Z",
        "2026-06-01T07:15:00Z",
    ]


def test_a_repeated_autumn_half_hour_is_two_buckets() -> None:
    # Lord Howe, 2025-04-06: 02:00 +11:00 → 01:30 +10:30.
    edges = _local_edges(
        "Australia/Lord_Howe", "2025-04-06T01:00+11:00", "2025-04-06T03:00+10:30", Interval.HOUR
    )
    assert edges == [
        "2025-04-06T01:00:00+11:00",
        "2025-04-06T01:30:00+10:30",  # 01:00–02:00 at +11, then 01:30–02:00 at +10:30
        "2025-04-06T02:00:00+10:30",
        "2025-04-06T03:00:00+10:30",
    ]


def test_apia_has_no_2011_12_30() -> None:
    edges = _local_edges(
        "Pacific/Apia", "2011-12-29T00:00-10:00", "2012-01-01T00:00+14:00", Interval.DAY
    )
    assert edges == [
        "2011-12-29T00:00:00-10:00",
        "2011-12-31T00:00:00+14:00",
        "2012-01-01T00:00:00+14:00",
    ]


def test_monrovia_1971_days_start_on_the_quarter_hour() -> None:
    # −0:44:30: local midnight is 00:44:30Z, the first quarter-hour of the day 00:45Z.
    tz = ZoneInfo("Africa/Monrovia")
    start = int(datetime(1971, 6, 1, 12, tzinfo=UTC).timestamp())
    assert iso_strings(bucket_edges(start, start + 1, Interval.DAY, tz)) == [
        "1971-06-01T00:45:00Z",
        "1971-06-02T00:45:00Z",
    ]


def _summed(
    edges: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    energy: npt.NDArray[np.float64],
    samples: npt.NDArray[np.int64],
    power: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[Any], ...]:
    """`aggregate_into`'s general way (`bincount`, `fmax.at`), whatever the rows."""
    count = len(edges) - 1
    index = np.searchsorted(edges, starts, side="right") - 1
    keep = (index >= 0) & (index < count) & ~np.isnan(energy)
    return grid._sum_into(count, index[keep], keep, energy, samples, power)


def _aggregated_as_summed(
    edges: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    energy: npt.NDArray[Any],
    samples: npt.NDArray[Any],
    power: npt.NDArray[Any],
) -> grid.EnergySeries:
    """`aggregate_into`'s buckets, checked byte for byte (and dtype) against `_summed`."""
    got = grid.aggregate_into(edges, starts, energy, samples, power)
    assert np.array_equal(got.starts, edges[:-1])
    want = _summed(edges, starts, energy, samples, power)
    for mine, theirs in zip((got.energy_wh, got.samples, got.power_max_w), want, strict=True):
        assert mine.dtype == theirs.dtype
        assert mine.tobytes() == theirs.tobytes()
    return got


def test_rows_one_per_bucket_are_placed_bit_for_bit_as_summed() -> None:
    """`aggregate_into` places rows that tile the buckets one to one (`_one_each`) with
    exactly the general way's results, byte for byte (NaN, the sign of zero, the samples'
    type), on 5,000 random cases: rows on some of the edges, and near misses that must take
    the general way — a row off an edge, two rows on one edge, rows outside the range, gaps
    (NaN energy), rows without samples, unreported powers, ±0.0."""
    rnd = random.Random(29)
    placed = 0
    for _ in range(5_000):
        k = rnd.randint(1, 30)
        steps = [rnd.choice([900, 3600, 82800, 86400]) for _ in range(k)]
        edges = np.cumsum([rnd.choice([0, 900, 3600]), *steps]).astype(np.int64)
        if rnd.random() < 0.7:
            starts = edges[sorted(rnd.sample(range(k), rnd.randint(0, k)))].copy()
            if rnd.random() < 0.1 and len(starts) > 1:
                starts[rnd.randrange(len(starts))] += 1  # off an edge
                starts.sort()
            if rnd.random() < 0.1 and len(starts) > 1:
                starts[1] = starts[0]  # two rows in one bucket
        else:
            lo, hi = int(edges[0]) - 2000, int(edges[-1]) + 2000
            starts = np.sort(
                np.array([rnd.randint(lo, hi) for _ in range(rnd.randint(0, 40))], dtype=np.int64)
            )

        def value() -> float:
            r = rnd.random()
            if r < 0.05:
                return math.nan
            if r < 0.3:
                return rnd.choice([0.0, -0.0])
            return rnd.random() * 1000

        m = len(starts)
        energy = np.array([value() for _ in range(m)], dtype=np.float64)
        samples = np.array(
            [rnd.choice([0, 1, 4, 96]) if rnd.random() < 0.2 else 1 for _ in range(m)],
            dtype=np.int64,
        )
        power = np.array([value() for _ in range(m)], dtype=np.float64)
        if grid._one_each(edges, k, starts, energy, samples, power) is not None:
            placed += 1
        _aggregated_as_summed(edges, starts, energy, samples, power)
    assert 1_000 < placed < 4_000  # both ways were taken


def test_rows_for_a_run_of_buckets_are_placed_bit_for_bit_as_summed() -> None:
    """Rows for a run of consecutive buckets (a calendar range reaching past the data), which
    `_one_each` places by a slice: the general way's results, byte for byte, on 3,000 random
    runs of local days and hours — with gaps, rows without samples, ±0.0, unreported powers,
    another dtype, and near misses (a row off its edge, a run with a hole)."""
    rnd = random.Random(31)
    rng = np.random.default_rng(31)
    placed = 0
    for _ in range(3_000):
        k = rnd.randint(2, 40)
        steps = [rnd.choice([3600, 82800, 86400, 86400, 90000]) for _ in range(k)]
        edges = np.cumsum([rnd.choice([0, 900]), *steps]).astype(np.int64)
        first = rnd.randrange(k)
        rows = rnd.randint(1, k - first)
        starts = edges[first : first + rows].copy()
        if rnd.random() < 0.1:
            starts[rnd.randrange(rows)] += 900  # off its edge
        if rnd.random() < 0.1 and rows > 2:
            starts = np.delete(starts, rnd.randrange(1, rows - 1))  # a hole in the run
        if rnd.random() < 0.05:
            starts = starts.astype(np.int32)
        m = len(starts)
        energy = rng.random(m) * 1000
        energy[rng.random(m) < 0.1] = rnd.choice([0.0, -0.0])
        if rnd.random() < 0.1:
            energy[rnd.randrange(m)] = math.nan
        samples = np.where(rng.random(m) < 0.1, 0, 96).astype(np.int64)
        power = rng.random(m) * 300
        power[rng.random(m) < 0.2] = math.nan
        if grid._one_each(edges, k, starts, energy, samples, power) is not None:
            placed += 1
        _aggregated_as_summed(edges, starts, energy, samples, power)
    assert 1_500 < placed < 2_900  # both ways were taken


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64, np.int32])
def test_rows_one_per_bucket_convert_energy_as_adding_zero_did(dtype: Any) -> None:
    """`_one_each` writes each bucket's energy as `np.add(energy, 0.0, dtype=float64)`: the
    bytes `(energy + 0.0).astype(float64)` gave (its way until now), for any dtype of the
    rows' energy, on random values with ±0.0 and extremes."""
    rng = np.random.default_rng(34)
    for _ in range(300):
        k = int(rng.integers(1, 40))
        edges = np.arange(0, 3600 * (k + 1), 3600, dtype=np.int64)
        if np.issubdtype(dtype, np.floating):
            info = np.finfo(dtype)
            pool = np.array([0.0, -0.0, float(info.max), -float(info.max), float(info.tiny)])
            values = rng.normal(0, 1e3, k)
            pick = rng.random(k) < 0.3
            values[pick] = rng.choice(pool, int(pick.sum()))
            energy = values.astype(dtype)
        else:
            info_i = np.iinfo(dtype)
            energy = rng.integers(info_i.min, info_i.max, k, dtype=dtype, endpoint=True)
        ones = np.ones(k, dtype=np.int64)
        with np.errstate(over="ignore"):  # (the gap check's dot product of extremes)
            placed = grid._one_each(edges, k, edges[:-1].copy(), energy, ones, np.zeros(k))
        assert placed is not None
        want = (energy + 0.0).astype(np.float64, copy=False)
        assert placed.energy_wh.dtype == np.float64
        assert placed.energy_wh.tobytes() == want.tobytes()


def test_many_series_are_summed_as_each_alone() -> None:
    """`aggregate_many` against `aggregate_into` of each series alone, byte for byte, on
    500 random fleets: series sharing an edges array (a zone's) and series with their own,
    rows before, inside and after their own series' edges (and inside another's), gaps,
    rows on edges and between them, one distinct array and several."""
    rnd = random.Random(34)
    for _ in range(500):
        arrays = []
        for _ in range(rnd.randint(1, 4)):
            steps = [rnd.choice([900, 3600, 82800, 86400, 90000]) for _ in range(rnd.randint(1, 8))]
            first = rnd.choice([0, 3600, 86400, 200_000])
            arrays.append(np.cumsum([first, *steps]).astype(np.int64))
        edges = [
            rnd.choice(arrays) if rnd.random() < 0.7 else arrays[-1].copy()
            for _ in range(rnd.randint(1, 12))
        ]
        per_series = []
        for e in edges:
            lo, hi = int(e[0]) - 5000, int(e[-1]) + 5000
            starts = np.unique(
                np.array(
                    [
                        rnd.choice([rnd.randint(lo, hi), int(rnd.choice(e))])
                        for _ in range(rnd.randint(0, 20))
                    ],
                    dtype=np.int64,
                )
            )
            m = len(starts)
            energy = np.array(
                [math.nan if rnd.random() < 0.1 else rnd.random() * 100 for _ in range(m)]
            )
            samples = np.array([rnd.choice([0, 1, 4]) for _ in range(m)], dtype=np.int64)
            power = np.array([math.nan if rnd.random() < 0.2 else rnd.random() for _ in range(m)])
            per_series.append((starts, energy, samples, power))
        owners = np.concatenate(
            [np.full(len(rows[0]), k, dtype=np.int64) for k, rows in enumerate(per_series)]
        )
        columns = [np.concatenate([rows[i] for rows in per_series]) for i in range(4)]
        many = grid.aggregate_many(edges, owners, *columns)
        for k, (e, rows) in enumerate(zip(edges, per_series, strict=True)):
            alone = aggregate_into(e, *rows)
            mine = many.series(k)
            assert np.array_equal(mine.starts, alone.starts)
            for name in ("energy_wh", "samples", "power_max_w"):
                assert getattr(mine, name).tobytes() == getattr(alone, name).tobytes()


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            "UTC",
            "Europe/Berlin",
            "Asia/Kolkata",
            "Pacific/Chatham",
            "Pacific/Apia",
            "America/Sao_Paulo",
            "Australia/Lord_Howe",
            "Africa/Monrovia",
            "America/St_Johns",
        ]
    ),
    st.dates(min_value=date(1970, 1, 1), max_value=date(2199, 12, 1)),
    st.integers(min_value=1, max_value=800),
)
def test_kept_day_midnights_are_each_days_own(zone: str, day: date, count: int) -> None:
    """`_day_midnights` (the kept midnights of whole years) against `local_midnight` of each
    day: across years, leap days, DST days, Apia's missing 2011-12-30, Monrovia's
    off-grid offset."""
    tz = ZoneInfo(zone)
    want = [grid.local_midnight(day + timedelta(days=i), tz) for i in range(count)]
    assert grid._day_midnights(day, count, tz) == want


def test_apia_2011_days_by_kept_midnights() -> None:
    """The day Apia skipped starts where the next one does (one edge, no bucket), from the
    kept midnights as from `local_midnight`."""
    tz = ZoneInfo("Pacific/Apia")
    day = date(2011, 12, 28)
    midnights = grid._day_midnights(day, 5, tz)
    assert midnights == [grid.local_midnight(day + timedelta(days=i), tz) for i in range(5)]
    assert midnights[2] == midnights[3]  # 2011-12-30 did not exist
    assert midnights[1] < midnights[2] < midnights[4]


def test_rows_for_every_bucket_are_placed_bit_for_bit_as_summed() -> None:
    """A row on every bucket's edge (the rows tile all the buckets: `_one_each` compares
    the starts with the edges as bytes, no search) against the general way, byte for byte,
    on 3,000 random cases: gaps (NaN energy), rows without samples, unreported powers,
    ±0.0 and infinities, columns of other types (int32 samples, float32 values, float
    starts: the same numbers, other bytes), and starts one off an edge."""
    rnd = random.Random(41)
    placed = 0
    for _ in range(3_000):
        k = rnd.randint(1, 40)
        steps = [rnd.choice([900, 3600, 82800, 86400]) for _ in range(k)]
        edges = np.cumsum([rnd.choice([0, 900, 3600]), *steps]).astype(np.int64)
        starts: npt.NDArray[Any] = edges[:-1].copy()
        if rnd.random() < 0.1:
            starts[rnd.randrange(k)] += rnd.choice([-1, 1])
        if rnd.random() < 0.1:
            starts = starts.astype(np.float64)

        def value() -> float:
            r = rnd.random()
            if r < 0.03:
                return math.nan
            if r < 0.05:
                return rnd.choice([math.inf, -math.inf])
            if r < 0.3:
                return rnd.choice([0.0, -0.0])
            return rnd.random() * 1000

        energy: npt.NDArray[Any] = np.array([value() for _ in range(k)], dtype=np.float64)
        samples: npt.NDArray[Any] = np.array(
            [rnd.choice([0, 1, 4]) if rnd.random() < 0.1 else 4 for _ in range(k)],
            dtype=np.int64,
        )
        power: npt.NDArray[Any] = np.array([value() for _ in range(k)], dtype=np.float64)
        if rnd.random() < 0.1:
            samples = samples.astype(np.int32)
        if rnd.random() < 0.1:
            energy, power = energy.astype(np.float32), power.astype(np.float32)
        if grid._one_each(edges, k, starts, energy, samples, power) is not None:
            placed += 1
        got = _aggregated_as_summed(edges, starts, energy, samples, power)
        # The buckets own their arrays: none is a row column.
        for column in (got.energy_wh, got.samples, got.power_max_w):
            assert not any(np.shares_memory(column, c) for c in (energy, samples, power))
    assert 1_000 < placed < 2_900  # both ways were taken


_ZONES = [
    "UTC",
    "Europe/Amsterdam",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Australia/Lord_Howe",
    "Africa/Monrovia",
    "Asia/Kathmandu",
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_ZONES),
    st.sampled_from([Interval.DAY, Interval.WEEK, Interval.MONTH]),
    st.integers(min_value=0, max_value=int(datetime(2150, 1, 1, tzinfo=UTC).timestamp())),
    st.integers(min_value=0, max_value=400 * 86400),
    st.integers(min_value=-3, max_value=3),
)
def test_calendar_edges_as_unique_and_masked(
    zone: str, interval: Interval, first: int, span: int, nudge: int
) -> None:
    """`_calendar_edges` (its midnights sorted, deduplicated and cut in Python) against the
    way it was written: `np.unique` of the periods' local midnights, masked to [first,
    last] — ends on and off the edges, Apia's missing day, off-grid and half-hour zones."""
    tz = ZoneInfo(zone)
    first = grid.floor_to_grid(first, interval, tz) + nudge * QUARTER_S
    last = first + span
    got = grid._calendar_edges.__wrapped__(first, last, interval, tz)
    day = grid._period_start(grid.local_date(first, tz), interval)
    count = grid._periods_between(
        day, grid._period_start(grid.local_date(last, tz), interval), interval
    )
    midnights = [
        grid.local_midnight(grid._add_periods(day, i, interval), tz) for i in range(count + 2)
    ]
    want = np.unique(np.array(midnights, dtype=np.int64))
    want = want[(want >= first) & (want <= last)]
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()
    assert not got.flags.writeable


def test_calendar_edges_over_apia_skip_one_day() -> None:
    """28 December 2011 to 2 January 2012 in Apia: five edges, not six — the 30th did not
    exist (the 29th's bucket ends where the 31st starts: 24 hours, UTC−10 to UTC+14)."""
    tz = ZoneInfo("Pacific/Apia")
    first = grid.local_midnight(date(2011, 12, 28), tz)
    last = grid.local_midnight(date(2012, 1, 2), tz)
    edges = grid._calendar_edges.__wrapped__(first, last, Interval.DAY, tz)
    assert iso_strings(edges) == [
        "2011-12-28T10:00:00Z",  # the 28th, UTC−10
        "2011-12-29T10:00:00Z",  # the 29th
        "2011-12-30T10:00:00Z",  # the 31st, UTC+14
        "2011-12-31T10:00:00Z",  # 1 January
        "2012-01-01T10:00:00Z",  # 2 January
    ]


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from([*_ZONES, "Australia/Adelaide", "America/Santiago", "Europe/Helsinki"]),
    st.integers(min_value=0, max_value=int(datetime(2199, 12, 1, tzinfo=UTC).timestamp())),
    st.integers(min_value=1, max_value=500 * 86400),
    st.booleans(),
)
def test_kept_day_range_is_the_general_ways(zone: str, lo: int, span: int, on_edge: bool) -> None:
    """A range of local days from the kept block (`_kept_day_range`, 1d's `widen_range`)
    against the general way (`floor_to_grid`, `ceil_to_grid`, `_calendar_edges`): ends on
    and off midnights, across DST changes, Apia's missing day, off-grid Monrovia."""
    tz = ZoneInfo(zone)
    if on_edge:
        lo = floor_to_grid(lo, Interval.DAY, tz)
    hi = lo + span
    if on_edge:
        hi = ceil_to_grid(hi, Interval.DAY, tz)
    got = grid._kept_day_range(lo, hi, tz)
    if got is None:  # outside the block (a long range): the general way answers
        assert span > 300 * 86400
        return
    start, end = floor_to_grid(lo, Interval.DAY, tz), ceil_to_grid(hi, Interval.DAY, tz)
    assert (got.start_s, got.end_s, got.interval, got.tz) == (start, end, Interval.DAY, tz)
    want = grid._calendar_edges.__wrapped__(start, end, Interval.DAY, tz)
    assert got.edges().tolist() == want.tolist()
    assert got.edges().dtype == want.dtype
    assert not got.edges().flags.writeable
    assert len(want) - 1 == bucket_count(start, end, Interval.DAY, tz)


@pytest.mark.parametrize(
    "zone", ["Europe/Amsterdam", "Asia/Kolkata", "Australia/Adelaide", "America/Santiago"]
)
def test_a_month_of_local_days_across_dst_changes(zone: str) -> None:
    """W3's windows (30 local days from a local midnight) starting on every day of two
    years: `widen_range` from the kept days equals the general way, edges and all."""
    tz = ZoneInfo(zone)
    for day in range(0, 731):
        first = datetime(2025, 1, 1, tzinfo=tz) + timedelta(days=day)
        start = first.astimezone(UTC)
        end = (first + timedelta(days=30)).astimezone(UTC)
        got = widen_range(start, end, Interval.DAY, tz)
        lo, hi = int(start.timestamp()), int(end.timestamp())
        want_start = floor_to_grid(lo, Interval.DAY, tz)
        want_end = ceil_to_grid(hi, Interval.DAY, tz)
        assert (got.start_s, got.end_s) == (want_start, want_end) == (lo, hi)
        edges = bucket_edges(lo, hi, Interval.DAY, tz)
        assert got.edges().tolist() == edges.tolist()
        assert len(edges) == 31
