"""`each_bucket` (what market-value reports read) gives every bucket exactly as the body of
`GET /systems/{id}/market-value` writes it: the same labels, the same rounded figures, `None`
where the body has `null`. Random production and prices with gaps, negative and zero prices,
on DST days and in a half-hour zone."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pytest

from solarapi.kit.grid import QUARTER_S, Interval, widen_range
from solarapi.kit.timefmt import format_timestamp
from solarapi.prices.market_value import MarketValue, each_bucket, render, valued_buckets

CASES = [
    ("Europe/Amsterdam", Interval.HOUR, datetime(2025, 10, 25, 12, tzinfo=UTC), 2),
    ("Europe/Amsterdam", Interval.DAY, datetime(2025, 3, 28, tzinfo=UTC), 5),
    ("Australia/Adelaide", Interval.MIN30, datetime(2025, 4, 5, 10, tzinfo=UTC), 1),
    ("UTC", Interval.MIN15, datetime(2025, 6, 15, tzinfo=UTC), 1),
    ("Europe/Berlin", Interval.MONTH, datetime(2025, 1, 1, tzinfo=UTC), 90),
]


@pytest.mark.parametrize(("zone", "interval", "start", "days"), CASES)
def test_each_bucket_is_the_rendered_body(
    zone: str, interval: Interval, start: datetime, days: int
) -> None:
    rng = np.random.default_rng(29)
    end = datetime.fromtimestamp(start.timestamp() + days * 86_400, UTC)
    time_range = widen_range(start, end, interval, ZoneInfo(zone))
    edges = time_range.edges()
    count = (time_range.end_s - time_range.start_s) // QUARTER_S
    energy = rng.random(count) * 10.0 ** float(rng.integers(-1, 4)) / 3.0
    energy[rng.random(count) < 0.3] = np.nan  # gaps in production
    energy[: (int(edges[1]) - time_range.start_s) // QUARTER_S] = np.nan  # a bucket without any
    prices = rng.normal(60.0, 80.0, count)  # negative ones too
    prices[rng.random(count) < 0.05] = 0.0
    prices[rng.random(count) < 0.2] = np.nan  # gaps in the prices
    valued = valued_buckets(energy, prices, edges)
    value = MarketValue("sys_1", "NL", interval, zone, "EUR", "csv", valued)

    body = orjson.loads(render(value))
    buckets = each_bucket(valued)

    assert len(buckets) == len(body["data"]) > 0
    assert any(item["energy_wh"] is None for item in body["data"])
    assert any(item["value_eur"] is not None for item in body["data"])
    for bucket, item in zip(buckets, body["data"], strict=True):
        as_body = asdict(bucket)
        start_s = as_body.pop("start_s")
        assert as_body == item
        assert format_timestamp(datetime.fromtimestamp(start_s, UTC)) == item["start"]
