"""`Readings.each_bucket()` (what reports read) gives every bucket exactly as `render` writes
it: the same labels, the same rounded figures, `None` where the body has `null`, and
`Readings.totals` is the body's `meta.totals`. Random series with gaps and missing powers,
on DST days (23- and 25-hour local days, a repeated autumn hour) and in a half-hour zone."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pytest

from solarapi.kit.grid import QUARTER_S, Interval, aggregate_into, widen_range
from solarapi.kit.timefmt import format_timestamp
from solarapi.readings.rendering import Readings, render

CASES = [
    ("Europe/Amsterdam", Interval.HOUR, datetime(2025, 10, 25, 12, tzinfo=UTC), 2),
    ("Europe/Amsterdam", Interval.DAY, datetime(2025, 3, 28, tzinfo=UTC), 5),
    ("Asia/Kolkata", Interval.HOUR, datetime(2025, 6, 14, 18, tzinfo=UTC), 1),
    ("Australia/Adelaide", Interval.MIN30, datetime(2025, 4, 5, 10, tzinfo=UTC), 1),
    ("UTC", Interval.MIN15, datetime(2025, 6, 15, tzinfo=UTC), 1),
    ("Europe/Berlin", Interval.MONTH, datetime(2025, 1, 1, tzinfo=UTC), 90),
]


@pytest.mark.parametrize(("zone", "interval", "start", "days"), CASES)
def test_each_bucket_is_the_rendered_body(
    zone: str, interval: Interval, start: datetime, days: int
) -> None:
    rng = np.random.default_rng(27)
    end = datetime.fromtimestamp(start.timestamp() + days * 86_400, UTC)
    time_range = widen_range(start, end, interval, ZoneInfo(zone))
    starts = np.arange(time_range.start_s, time_range.end_s, QUARTER_S, dtype=np.int64)
    energy = rng.random(len(starts)) * 10.0 ** float(rng.integers(-1, 4)) / 3.0
    energy[rng.random(len(starts)) < 0.3] = np.nan  # gaps
    edges = time_range.edges()
    energy[starts < edges[1]] = np.nan  # a first bucket without any reading
    power = energy * 4.0
    power[rng.random(len(starts)) < 0.5] = np.nan  # power not reported
    samples = np.ones(len(starts), dtype=np.int64)
    buckets = aggregate_into(edges, starts, energy, samples, power)
    readings = Readings("sys_1", zone, time_range, buckets)

    body = orjson.loads(render(readings))
    figures = readings.each_bucket()

    assert len(figures) == len(body["data"]) > 0
    assert any(bucket["energy_wh"] is None for bucket in body["data"])
    for figure, bucket in zip(figures, body["data"], strict=True):
        as_body = asdict(figure)
        start_s = as_body.pop("start_s")
        assert as_body == bucket
        assert format_timestamp(datetime.fromtimestamp(start_s, UTC)) == bucket["start"]
    assert asdict(readings.totals) == body["meta"]["totals"]


@pytest.mark.parametrize(
    ("energy", "power"),
    [
        ([12.5], [np.nan]),  # one bucket: its numbers are the dump's first and last piece
        ([np.nan], [3.0]),
        (
            [np.nan, 1e300, 0.0004, -0.0, 123456.7891, 5e-324, 2.0**53 + 1, np.nan],
            [1e-7, np.nan, 1e300, 0.1, 1 / 3, 1e16, 99999999999.9995, 7.0],
        ),
    ],
)
def test_rendered_numbers_are_orjsons_own(energy: list[float], power: list[float]) -> None:
    """The body's buckets, byte for byte, as orjson writes one dict per bucket (the rounded
    values, NaN as null): first and last values, NaN at either end, extreme floats."""
    days = len(energy)
    start = datetime(2025, 3, 28, tzinfo=UTC)
    end = datetime.fromtimestamp(start.timestamp() + days * 86_400, UTC)
    zone = ZoneInfo("Europe/Amsterdam")  # (its spring DST day among the buckets)
    edges = widen_range(start, end, Interval.DAY, zone).edges()[: days + 1]
    time_range = widen_range(start, datetime.fromtimestamp(int(edges[-1]), UTC), Interval.DAY, zone)
    edges = time_range.edges()
    assert len(edges) == days + 1
    values = np.array(energy)
    samples = np.where(np.isnan(values), 0, np.arange(1, days + 1)).astype(np.int64)
    buckets = aggregate_into(edges, edges[:-1], values, samples, np.array(power))
    body = render(Readings("sys_1", "Europe/Amsterdam", time_range, buckets))

    def written(value: float) -> float | None:
        rounded = float(np.round(np.float64(value), 3))
        return None if np.isnan(rounded) else rounded

    labels = [format_timestamp(datetime.fromtimestamp(int(edge), UTC)) for edge in edges]
    hours = np.diff(edges) / 3600.0
    expected = [
        {
            "start": labels[i],
            "end": labels[i + 1],
            "energy_wh": written(buckets.energy_wh[i]),
            "power_avg_w": written(buckets.energy_wh[i] / hours[i]),
            "power_max_w": written(buckets.power_max_w[i]),
            "samples": int(buckets.samples[i]),
            "expected_samples": int(hours[i] * 4),
        }
        for i in range(days)
    ]
    assert body.split(b'],"meta":')[0] == b'{"data":' + orjson.dumps(expected)[:-1]
