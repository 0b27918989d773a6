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
