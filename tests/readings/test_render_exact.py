"""`render`'s body, byte for byte, against the contract's shape written independently: a
dict per bucket (labels by `datetime.strftime`, bucket lengths from the edges, the figures
rounded as numpy rounds them, NaN as null) serialised by orjson.

Over every interval, zones with whole-hour, half-hour and 45-minute offsets and a 30-minute
clock change (Lord Howe), windows across clock changes and across the kept stretches of the
grid (`_STRIP` buckets) the renderer cuts fixed-interval frames from, random values with
gaps, missing powers, short buckets, negative, tiny, huge and integral values; each range
rendered with every cache empty, then again with its frame, stretches and labels kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pytest

from solarapi.kit import grid
from solarapi.kit.grid import EnergySeries, Interval, widen_range
from solarapi.readings import rendering
from solarapi.readings.rendering import Readings, render

ZONES = [
    "Europe/Amsterdam",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "America/New_York",
    "UTC",
]
# Around Europe's and New York's autumn change, and Lord Howe's and Chatham's spring one.
ANCHORS = [
    datetime(2025, 10, 25, 18, tzinfo=UTC),
    datetime(2025, 11, 1, 20, tzinfo=UTC),
    datetime(2025, 10, 4, 10, tzinfo=UTC),
    datetime(2025, 9, 27, 10, tzinfo=UTC),
    datetime(2026, 3, 28, 22, 30, tzinfo=UTC),
]
SPANS = {  # longest window drawn, in hours
    Interval.MIN15: 24 * 8,
    Interval.MIN30: 24 * 12,
    Interval.HOUR: 24 * 30,
    Interval.DAY: 24 * 400,
    Interval.WEEK: 24 * 800,
    Interval.MONTH: 24 * 2000,
}


def _label(instant: int) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _or_none(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _reference(readings: Readings) -> bytes:
    edges = readings.time_range.edges()
    buckets = readings.buckets
    lengths = np.diff(edges)
    energy = np.round(buckets.energy_wh, 3)
    average = np.round(buckets.energy_wh / (lengths / 3600.0), 3)
    peak = np.round(buckets.power_max_w, 3)
    data = [
        {
            "start": _label(int(edges[i])),
            "end": _label(int(edges[i + 1])),
            "energy_wh": _or_none(energy[i]),
            "power_avg_w": _or_none(average[i]),
            "power_max_w": _or_none(peak[i]),
            "samples": int(buckets.samples[i]),
            "expected_samples": int(lengths[i] // 900),
        }
        for i in range(len(lengths))
    ]
    samples = int(buckets.samples.sum())
    known = np.where(np.isnan(buckets.energy_wh), 0.0, buckets.energy_wh)
    powers = buckets.power_max_w[~np.isnan(buckets.power_max_w)]
    meta: dict[str, Any] = {
        "system_id": readings.system_id,
        "interval": readings.time_range.interval.value,
        "timezone": readings.timezone,
        "from": _label(int(edges[0])),
        "to": _label(int(edges[-1])),
        "totals": {
            "energy_wh": round(float(known.sum()), 3) if samples else None,
            "power_max_w": round(float(powers.max()), 3) if len(powers) else None,
            "samples": samples,
            "expected_samples": int(lengths.sum() // 900),
        },
    }
    return orjson.dumps({"data": data, "meta": meta})


def _series(rng: np.random.Generator, edges: np.ndarray) -> EnergySeries:
    n = len(edges) - 1
    expected = np.diff(edges) // 900
    scale = 10.0 ** rng.integers(-4, 13, n)
    energy = rng.uniform(-1, 1, n) * scale
    energy[rng.random(n) < 0.2] = 0.0
    energy[rng.random(n) < 0.1] = 1500.0
    samples = expected.copy()
    short = rng.random(n) < 0.1
    samples[short] = rng.integers(1, 4, int(short.sum()))
    gaps = rng.random(n) < 0.1
    energy[gaps] = np.nan
    samples[gaps] = 0
    power = rng.uniform(0, 9000, n)
    power[rng.random(n) < 0.2] = np.nan
    if rng.random() < 0.2:  # a day without any data, or without any power
        energy[:] = np.nan
        samples[:] = 0
    if rng.random() < 0.1:
        power[:] = np.nan
    return EnergySeries(edges[:-1], energy, samples.astype(np.int64), power)


def _forget() -> None:
    rendering._FRAMES.clear()
    rendering._STRIPS.clear()
    rendering._day_text.cache_clear()
    grid._kept_days.cache_clear()
    grid._LABELS.clear()


@pytest.mark.parametrize("interval", list(Interval))
def test_render_is_the_contracts_body(interval: Interval) -> None:
    rng = np.random.default_rng(list(Interval).index(interval))
    for case in range(120):
        zone = ZoneInfo(ZONES[case % len(ZONES)])
        anchor = ANCHORS[int(rng.integers(len(ANCHORS)))]
        start = anchor + timedelta(minutes=int(rng.integers(-48 * 60, 48 * 60)))
        hours = 1 + int(rng.integers(0, SPANS[interval]))
        end = start + timedelta(hours=hours, minutes=int(rng.integers(0, 60)))
        time_range = widen_range(start, end, interval, zone)
        edges = time_range.edges()
        readings = Readings(f"sys_{case}", zone.key, time_range, _series(rng, edges))
        expected = _reference(readings)
        if case % 3 == 0:
            _forget()
        assert render(readings) == expected, (interval, zone, start, end)
        assert render(readings) == expected  # its frame, stretches and labels kept


def test_a_window_across_stretches_of_the_grid() -> None:
    """Windows of `15m` ending on every quarter-hour of two stretches' joint (each cut from
    two kept stretches, or one), as a poller's moving day is."""
    rng = np.random.default_rng(7)
    zone = ZoneInfo("Europe/Amsterdam")
    joint = rendering._STRIP * 900 * 20
    _forget()
    for k in range(-100, 100, 3):
        end = datetime.fromtimestamp(joint + 900 * k, UTC)
        time_range = widen_range(end - timedelta(days=1), end, Interval.MIN15, zone)
        readings = Readings("sys_x", zone.key, time_range, _series(rng, time_range.edges()))
        assert render(readings) == _reference(readings)


def test_labels_are_kept_and_forgotten() -> None:
    """`iso_strings` answers the same whether its instants' texts are kept, partly kept or
    forgotten when the store is full."""
    instants = np.array([0, 86399, 1750000000, 4102444799, 1750000000], dtype=np.int64)
    texts = [_label(int(t)) for t in instants]
    grid._LABELS.clear()
    assert grid.iso_strings(instants[:2]) == texts[:2]
    assert grid.iso_strings(instants) == texts
    assert grid.iso_strings(instants) == texts
    kept = grid._LABELS_KEPT
    try:
        grid._LABELS_KEPT = 3
        grid._LABELS.clear()
        assert grid.iso_strings(instants) == texts
        assert len(grid._LABELS) <= 4
        assert grid.iso_strings(instants[::-1]) == texts[::-1]
    finally:
        grid._LABELS_KEPT = kept


def test_a_range_on_the_utc_grid_has_the_edges_and_frame_of_the_general_way() -> None:
    # `widen_range` marks a sub-daily range of a zone whose grid is the UTC grid around it
    # (`utc_grid`): its edges are then made, and its frame cut, without asking the zone or
    # comparing the edges. The same edges and frame as a range of the same ends unmarked.
    rng = np.random.default_rng(34)
    marked = 0
    for _ in range(400):
        zone = ZoneInfo(ZONES[int(rng.integers(len(ZONES)))])
        interval = [Interval.MIN15, Interval.MIN30, Interval.HOUR][int(rng.integers(3))]
        start = ANCHORS[int(rng.integers(len(ANCHORS)))] + timedelta(
            seconds=int(rng.integers(-3 * 86_400, 3 * 86_400))
        )
        end = start + timedelta(seconds=int(rng.integers(1, 3 * 86_400)))
        found = widen_range(start, end, interval, zone)
        plain = grid.TimeRange(found.start_s, found.end_s, interval, zone)
        assert found == plain
        assert (
            found.edges().tolist()
            == grid.bucket_edges(found.start_s, found.end_s, interval, zone).tolist()
        )
        if found.utc_grid:
            marked += 1
            rendering._FRAMES.clear()
            ours = rendering._frame(found)
            rendering._FRAMES.clear()
            assert rendering._frame(plain) == ours
    assert marked > 100


# Zones for local days: whole-hour with DST (and DST changes at midnight: Santiago, Sao
# Paulo's past), half-hour (Kolkata, Adelaide with DST), 45-minute (Chatham, Kathmandu),
# a 30-minute DST shift (Lord Howe), Apia's missing 2011-12-30, Monrovia's off-grid offset.
DAY_ZONES = [
    "Europe/Amsterdam",
    "Europe/Helsinki",
    "America/Santiago",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Australia/Adelaide",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Africa/Monrovia",
]


@pytest.mark.parametrize("zone", DAY_ZONES)
def test_a_kept_day_frame_is_the_written_one(zone: str) -> None:
    """A range of local days' frame cut from its zone's kept block (`_kept_day_frame`)
    against the one written from its edges (`_written_frame`): windows of 1 to 400 days
    starting on every few days of the years around DST changes, a year's end, the blocks'
    ends, Apia's 2011 and Monrovia's 1971."""
    tz = ZoneInfo(zone)
    rng = np.random.default_rng(len(zone))
    cut = 0
    for year in (1971, 2011, 2025, 2026, 2199):
        start = datetime(year, 1, 1, tzinfo=UTC) - timedelta(days=40)
        for day in range(0, 440, 3):
            lo = start + timedelta(days=day, seconds=int(rng.integers(0, 86400)))
            span = int(rng.choice([1, 7, 30, 31, int(rng.integers(1, 400))]))
            if lo >= grid.LATEST - timedelta(days=1):
                break
            hi = min(lo + timedelta(days=span), grid.LATEST)
            time_range = widen_range(lo, hi, Interval.DAY, tz)
            frame = rendering._kept_day_frame(time_range)
            if frame is None:
                continue
            cut += 1
            want = rendering._written_frame(time_range.edges())
            assert (frame.count, frame.template, frame.expected_samples) == (
                want.count,
                want.template,
                want.expected_samples,
            )
            assert (frame.first, frame.last) == (want.first, want.last)
            assert frame.hours.tolist() == want.hours.tolist()
            assert not frame.hours.flags.writeable
    assert cut > 600


def test_a_month_of_kept_days_renders_the_contracts_body() -> None:
    """W3's request, 30 local days at 1d, in every day-zone across DST changes: the body
    from the kept days, from an empty cache and again with everything kept."""
    rng = np.random.default_rng(30)
    for zone in DAY_ZONES:
        tz = ZoneInfo(zone)
        for day in range(0, 366, 11):
            first = datetime(2025, 9, 1, tzinfo=tz) + timedelta(days=day)
            last = first + timedelta(days=30)
            time_range = widen_range(first.astimezone(UTC), last.astimezone(UTC), Interval.DAY, tz)
            readings = Readings("sys_x", zone, time_range, _series(rng, time_range.edges()))
            _forget()
            body = render(readings)
            assert body == _reference(readings)
            rendering._FRAMES.clear()
            assert render(readings) == body
