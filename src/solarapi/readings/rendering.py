"""The typed answer of a readings query and its one JSON rendering.

`render` writes the body of `GET /systems/{id}/readings` (documented by
`readings.schemas.ReadingsOut`) straight to bytes: each bucket's text that does not depend
on the data — its `start` and `end` labels, its `expected_samples`, the keys — is built once
per range and kept (`_frame`, a pure function of the range, so never stale); the numbers are
written by orjson in one call per column set, NaN as `null`. Building a dict per bucket and
serialising those cost more than the rest of the request on a year of days.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from cachetools import LRUCache, cached

from solarapi.kit.grid import QUARTER_S, Buckets, FloatArray, TimeRange, iso_strings

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


@dataclass(frozen=True, slots=True)
class Totals:
    energy_wh: float | None  # None: no bucket has a sample
    power_max_w: float | None  # None: no sample reported a power
    samples: int
    expected_samples: int


@dataclass(frozen=True, slots=True)
class Readings:
    """Energy of a system in the buckets of `time_range` (the request's range widened to the
    grid): what `GET /systems/{id}/readings` answers."""

    system_id: str
    timezone: str
    time_range: TimeRange
    buckets: Buckets
    simulated: bool = False  # the sandbox model's, up to `now`: not a function of the database

    @property
    def totals(self) -> Totals:
        return _totals(self.buckets, _frame(self.time_range))

    def to_api(self) -> dict[str, Any]:
        """The body as Python values (for the dashboard and reports): the rendering parsed
        back, so there is exactly one way a bucket is written."""
        body: dict[str, Any] = orjson.loads(render(self))
        return body


def render(readings: Readings) -> bytes:
    """The JSON body: `data` (one object per bucket, gaps as `null` with `samples: 0`) and
    `meta`."""
    frame = _frame(readings.time_range)
    meta = orjson.dumps(
        {
            "system_id": readings.system_id,
            "interval": readings.time_range.interval.value,
            "timezone": readings.timezone,
            "from": frame.first,
            "to": frame.last,
            "totals": _totals_dict(readings.buckets, frame),
        }
    )
    return b'{"data":[' + _data(readings.buckets, frame) + b'],"meta":' + meta + b"}"


def render_fleet_item(readings: Readings) -> bytes:
    """One system of `GET /portfolio/readings`: the same buckets and totals as `render`
    writes for the system, with its id, zone and widened range beside them."""
    frame = _frame(readings.time_range)
    head = orjson.dumps(
        {
            "system_id": readings.system_id,
            "timezone": readings.timezone,
            "from": frame.first,
            "to": frame.last,
        }
    )
    totals = orjson.dumps(_totals_dict(readings.buckets, frame))
    data = _data(readings.buckets, frame)
    return head[:-1] + b',"data":[' + data + b'],"totals":' + totals + b"}"


def _data(buckets: Buckets, frame: _Frame) -> bytes:
    if not frame.count:
        return b""
    # Per bucket: energy, average power, maximum power, rounded to 3 decimals.
    values = np.round(
        np.stack((buckets.energy_wh, buckets.energy_wh / frame.hours, buckets.power_max_w), axis=1),
        3,
    )
    numbers = orjson.dumps(values.ravel(), option=_NUMPY)[1:-1].split(b",")
    samples = orjson.dumps(buckets.samples, option=_NUMPY)[1:-1].split(b",")
    parts = frame.parts.copy()
    parts[1::8] = numbers[0::3]
    parts[3::8] = numbers[1::3]
    parts[5::8] = numbers[2::3]
    parts[7::8] = samples
    return b"".join(parts)


def _totals_dict(buckets: Buckets, frame: _Frame) -> dict[str, Any]:
    totals = _totals(buckets, frame)
    return {
        "energy_wh": totals.energy_wh,
        "power_max_w": totals.power_max_w,
        "samples": totals.samples,
        "expected_samples": totals.expected_samples,
    }


def _totals(buckets: Buckets, frame: _Frame) -> Totals:
    samples = int(buckets.samples.sum())
    # fmax skips NaN (a bucket without a reported power); NaN only when all are.
    power_max = float(np.fmax.reduce(buckets.power_max_w)) if frame.count else math.nan
    return Totals(
        energy_wh=round(float(_nansum(buckets.energy_wh)), 3) if samples else None,
        power_max_w=None if math.isnan(power_max) else round(power_max, 3),
        samples=samples,
        expected_samples=frame.expected_samples,
    )


def _nansum(values: FloatArray) -> float:
    """`np.nansum` (the same sum of the same array, NaN as 0) without its Python-level
    overhead, several times the sum itself on a day of hours."""
    return float(np.where(np.isnan(values), 0.0, values).sum())


@dataclass(frozen=True, slots=True)
class _Frame:
    """The data-independent text of a range's buckets. `parts` holds, for bucket i, at
    8i + 0, 2, 4, 6 the text before its energy, average power, maximum power and samples
    (the previous bucket's closing text joined to this one's opening), at the odd places
    room for those four numbers, and at the end the last bucket's closing text."""

    count: int
    parts: list[bytes]
    hours: FloatArray  # each bucket's length in hours
    expected_samples: int
    first: str
    last: str


def _frame_size(frame: _Frame) -> int:
    return 256 * frame.count + 256  # roughly the bytes it holds


# A range's frame is a pure function of it, so kept without any invalidation; bounded in
# bytes (a 10,000-bucket range holds ~2.5 MB). Shared by the event loop and any thread
# that renders, hence the lock.
@cached(LRUCache(maxsize=32 * 2**20, getsizeof=_frame_size), lock=threading.Lock())
def _frame(time_range: TimeRange) -> _Frame:
    edges = time_range.edges()
    lengths = np.diff(edges)
    expected = (lengths // QUARTER_S).tolist()
    labels = iso_strings(edges)
    parts: list[bytes] = []
    closing = b""
    for start, end, bucket_expected in zip(labels, labels[1:], expected, strict=False):
        parts += [
            closing + b'{"start":"%s","end":"%s","energy_wh":' % (start.encode(), end.encode()),
            b"",
            b',"power_avg_w":',
            b"",
            b',"power_max_w":',
            b"",
            b',"samples":',
            b"",
        ]
        closing = b',"expected_samples":%d},' % bucket_expected
    parts.append(closing[:-1])
    return _Frame(
        count=len(expected),
        parts=parts,
        hours=lengths / 3600.0,
        expected_samples=int(sum(expected)),
        first=labels[0],
        last=labels[-1],
    )
