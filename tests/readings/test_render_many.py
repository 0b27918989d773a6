"""A portfolio page's items (`render_many`: all systems' numbers written by one orjson call
that becomes the page's format, the sample counts looked up, the text between the numbers
cut from each range's frame once, the totals written from columns) are byte for byte
what the per-system endpoint's `render` writes for each system: systems in whole-hour,
half-hour and 45-minute zones over windows with DST days, random values with gaps, missing
powers, no data at all, negative, tiny, huge and integral values, small pages and large
ones, every slice of systems a page can be, and equal ranges that are distinct objects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pytest

from solarapi.kit.grid import EnergySeries, Interval, ManyBuckets, TimeRange, widen_range
from solarapi.readings.rendering import (
    _SAMPLE_TEXT,
    ManyReadings,
    Readings,
    _sample_texts,
    _split_array,
    render,
    render_many,
)

ZONES = ["Europe/Amsterdam", "Asia/Kolkata", "Pacific/Chatham", "America/New_York", "UTC"]
# 40 days from here hold the end of Amsterdam's and New York's summer time (25-hour days)
# and the start of Chatham's; 3 days from the second, Amsterdam's.
START = datetime(2025, 9, 20, 7, tzinfo=UTC)
FALL = datetime(2025, 10, 25, 7, tzinfo=UTC)


def _values(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale = 10.0 ** rng.integers(-4, 17, n)  # from 0.0001 to 1e16: plain and exponent text
    energy = rng.uniform(-1, 1, n) * scale
    integral = rng.random(n) < 0.1
    energy[integral] = np.round(energy[integral])
    energy[rng.random(n) < 0.1] = 0.0
    energy[rng.random(n) < 0.05] = -0.0
    energy[rng.random(n) < 0.1] = 1500.0  # integral: `1500.0`
    gaps = rng.random(n) < 0.15
    energy[gaps] = np.nan
    samples = np.where(gaps, 0, rng.integers(1, 101, n)).astype(np.int64)
    power = rng.uniform(0, 9000, n)
    power[rng.random(n) < 0.3] = np.nan
    return energy, samples, power


def _fleet(
    rng: np.random.Generator, systems: int, start: datetime, days: int, interval: Interval
) -> tuple[ManyReadings, list[Readings]]:
    end = start + timedelta(days=days)
    shared = {z: widen_range(start, end, interval, ZoneInfo(z)) for z in ZONES}
    ranges: list[TimeRange] = []
    for k in range(systems):
        zone = ZONES[k % len(ZONES)]
        if k in (0, 4) or k == systems - 1:  # no bucket at all (the code allows for one)
            one = shared[zone]
            ranges.append(TimeRange(one.start_s, one.start_s, one.interval, one.tz))
            continue
        # Every third system its own (equal) range object: found by value, not identity.
        ranges.append(
            widen_range(start, end, interval, ZoneInfo(zone)) if k % 3 == 2 else shared[zone]
        )
    edges = [r.edges() for r in ranges]
    offsets = np.zeros(systems + 1, dtype=np.int64)
    np.cumsum([len(e) - 1 for e in edges], out=offsets[1:])
    energy, samples, power = _values(rng, int(offsets[-1]))
    # Half the buckets with all their samples (their count kept with the frame's text), the
    # others with fewer (or more: a count is not checked against the bucket's length).
    expected = np.concatenate([np.diff(e) // 900 for e in edges])
    whole = (rng.random(len(samples)) < 0.5) & (samples > 0)
    samples[whole] = expected[whole]
    for k in range(0, systems, 7):  # a system without any data
        energy[offsets[k] : offsets[k + 1]] = np.nan
        samples[offsets[k] : offsets[k + 1]] = 0
        power[offsets[k] : offsets[k + 1]] = np.nan
    # Ids as orjson writes them, quotes, commas and backslashes escaped among them.
    odd = ['a","b', "x\\", '"', ",", '\\","', "é€\n"]
    ids = tuple(
        odd[k // 2] if k % 2 and k // 2 < len(odd) else f"sys_{k:04d}" for k in range(systems)
    )
    zones = tuple(ZONES[k % len(ZONES)] for k in range(systems))
    many = ManyReadings(
        ids, zones, tuple(ranges), ManyBuckets(tuple(edges), offsets, energy, samples, power)
    )
    singles = [
        Readings(
            ids[k],
            zones[k],
            ranges[k],
            EnergySeries(
                edges[k][:-1],
                energy[offsets[k] : offsets[k + 1]],
                samples[offsets[k] : offsets[k + 1]],
                power[offsets[k] : offsets[k + 1]],
            ),
        )
        for k in range(systems)
    ]
    return many, singles


def _item(single: Readings) -> bytes:
    """The per-system body as a portfolio item: its `data` and `meta` rearranged by text,
    not parsed, so the numbers are compared as written."""
    body = render(single)
    data_end = body.index(b'],"meta":')
    data = body[len(b'{"data":[') : data_end]
    meta = orjson.loads(body[data_end + len(b'],"meta":') : -1])
    head = orjson.dumps(
        {
            "system_id": meta["system_id"],
            "timezone": meta["timezone"],
            "from": meta["from"],
            "to": meta["to"],
        }
    )
    totals = orjson.dumps(meta["totals"])
    return head[:-1] + b',"data":[' + data + b'],"totals":' + totals + b"}"


@pytest.mark.parametrize(
    ("systems", "start", "days", "interval"),
    [
        (12, START, 40, Interval.DAY),
        (60, START, 40, Interval.DAY),
        (11, FALL, 3, Interval.MIN15),  # over a 25-hour day
        (9, FALL, 6, Interval.HOUR),  # Kolkata's and Chatham's hours off the UTC hour
        (8, START, 70, Interval.MONTH),
    ],
)
def test_render_many_writes_each_system_as_render(
    systems: int, start: datetime, days: int, interval: Interval
) -> None:
    rng = np.random.default_rng(29 + systems)
    many, singles = _fleet(rng, systems, start, days, interval)
    totals = many.totals()
    assert len(totals) == systems
    assert [totals[k] for k in range(systems)] == [single.totals for single in singles]
    assert totals[1:4] == [single.totals for single in singles[1:4]]
    for lo, hi in [(0, systems), (0, 1), (1, 4), (systems - 2, systems), (3, 3)]:
        body = b"".join(render_many(many, totals, lo, hi))
        assert body == b",".join(_item(single) for single in singles[lo:hi]), (lo, hi)
        # The text around the items (the envelope) written with them.
        around = b"".join(render_many(many, totals, lo, hi, (b'{"data":[', b"]}")))
        assert around == b'{"data":[' + body + b"]}", (lo, hi)
    # The page's JSON as the endpoint wraps it parses, with the per-system numbers.
    parsed = orjson.loads(b"[" + b"".join(render_many(many, totals, 0, systems)) + b"]")
    assert [item["system_id"] for item in parsed] == list(many.system_ids)


def test_sample_counts_looked_up_as_written() -> None:
    def written(samples: np.ndarray) -> list[bytes]:
        return [b',"samples":' + text for text in _split_array(samples)]

    table = np.arange(len(_SAMPLE_TEXT), dtype=np.int64)
    assert _sample_texts(table).tolist() == written(table)
    beyond = np.concatenate([table, [len(_SAMPLE_TEXT), 10**12]])  # past the table: written
    assert _sample_texts(beyond).tolist() == written(beyond)
    assert _sample_texts(np.array([0, 96, 100])).tolist() == [
        b',"samples":0',
        b',"samples":96',
        b',"samples":100',
    ]
