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
