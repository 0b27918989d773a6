"""The typed answer of a readings query and its one JSON rendering.

`render` writes the body of `GET /systems/{id}/readings` (documented by
`readings.schemas.ReadingsOut`) straight to bytes: each bucket's text that does not depend
on the data — its `start` and `end` labels, its `expected_samples`, the keys — is built once
per range and kept (`_frame`, a pure function of the range, so never stale); the numbers are
written by orjson in one call per column set, NaN as `null`. Building a dict per bucket and
serialising those cost more than the rest of the request on a year of days.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast, overload
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
import orjson
from cachetools import LRUCache, cached

from solarapi.kit.grid import (
    QUARTER_S,
    EnergySeries,
    FloatArray,
    IntArray,
    Interval,
    KeptDays,
    ManyBuckets,
    TimeRange,
    iso_strings,
    kept_days,
)

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see `kit.grid.TimeRange`
class Totals:
    """The one totals type of a series of energy: a readings body's `meta.totals`, each
    system's in a portfolio, a period's (`readings.service.period_totals`)."""

    energy_wh: float | None  # None: no bucket has a sample
    power_max_w: float | None  # None: no sample reported a power
    samples: int
    expected_samples: int


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see `kit.grid.TimeRange`
class Readings:
    """Energy of a system in the buckets of `time_range` (the request's range widened to the
    grid): what `GET /systems/{id}/readings` answers."""

    system_id: str
    timezone: str
    time_range: TimeRange
    buckets: EnergySeries
    simulated: bool = False  # the sandbox model's, up to `now`: not a function of the database

    @property
    def totals(self) -> Totals:
        return _totals(self.buckets, _frame(self.time_range))

    def each_bucket(self) -> list[BucketFigures]:
        """Every bucket with the figures `render` writes for it (the same rounding, `None`
        where the body has `null`): what reports read, without a JSON round trip."""
        frame = _frame(self.time_range)
        if not frame.count:
            return []
        edges = self.time_range.edges()
        labels = iso_strings(edges)
        buckets = self.buckets
        figures = _rounded(buckets.energy_wh, frame.hours, buckets.power_max_w).tolist()
        expected = (np.diff(edges) // QUARTER_S).tolist()
        return [
            BucketFigures(
                labels[i],
                labels[i + 1],
                int(edges[i]),
                _or_none(energy),
                _or_none(average),
                _or_none(peak),
                samples,
                expected[i],
            )
            for i, ((energy, average, peak), samples) in enumerate(
                zip(figures, buckets.samples.tolist(), strict=True)
            )
        ]

    def to_api(self) -> dict[str, Any]:
        """The body as Python values (the dashboard's chart data): the rendering parsed
        back, so there is exactly one way a bucket is written."""
        body: dict[str, Any] = orjson.loads(render(self))
        return body


@dataclass(frozen=True, slots=True)
class BucketFigures:
    """One bucket of a `Readings` as the body writes it: its `start` and `end` labels, its
    figures rounded as rendered (None where the body has `null`)."""

    start: str
    end: str
    start_s: int
    energy_wh: float | None
    power_avg_w: float | None
    power_max_w: float | None
    samples: int
    expected_samples: int


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def render(readings: Readings) -> bytes:
    """The JSON body: `data` (one object per bucket, gaps as `null` with `samples: 0`) and
    `meta`."""
    frame = _frame(readings.time_range)
    meta = orjson.dumps(
        {
            "system_id": readings.system_id,
            "interval": readings.time_range.interval,  # (a str: written as its value)
            "timezone": readings.timezone,
            "from": frame.first,
            "to": frame.last,
            "totals": _totals_body(_totals(readings.buckets, frame)),
        }
    )
    return b"".join((b'{"data":[', _data(readings.buckets, frame), b'],"meta":', meta, b"}"))


@dataclass(frozen=True, slots=True)
class ManyReadings:
    """Energy of several systems, each in the buckets of its own widened range (a portfolio):
    system k's part is what `GET /systems/{id}/readings` answers for it — the same rows
    summed by the same function (`kit.grid.aggregate_many`), rendered by the same code."""

    system_ids: tuple[str, ...]
    timezones: tuple[str, ...]
    time_ranges: tuple[TimeRange, ...]
    buckets: ManyBuckets

    def totals(self) -> ManyTotals:
        """Each system's `meta.totals`, in the systems' order."""
        return _many_totals(self.buckets, _frames(self.time_ranges))


@dataclass(frozen=True, slots=True)
class ManyTotals(Sequence[Totals]):
    """Several systems' `Totals` as columns (item k is system k's `Totals`, made when
    asked for): a portfolio's thousand systems need their sums and their text, not an object
    each."""

    energy_wh: list[float | None]
    power_max_w: list[float | None]
    samples: list[int]
    expected_samples: list[int]

    def __len__(self) -> int:
        return len(self.samples)

    @overload
    def __getitem__(self, k: int) -> Totals: ...
    @overload
    def __getitem__(self, k: slice) -> list[Totals]: ...
    def __getitem__(self, k: int | slice) -> Totals | list[Totals]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return Totals(
            self.energy_wh[k], self.power_max_w[k], self.samples[k], self.expected_samples[k]
        )


def render_many(
    readings: ManyReadings,
    totals: ManyTotals,
    lo: int,
    hi: int,
    around: tuple[bytes, bytes] = (b"", b""),
) -> list[bytes]:
    """Systems lo to hi of a `ManyReadings` as the items of `GET /portfolio/readings`'s
    `data`, comma-separated, with the text `around` them (the envelope) written in the same
    pass (a body of megabytes is made once, not copied per concatenation or join): per
    system its id, zone and widened range, and the buckets and totals `render` writes for
    it — the same frame text, each number written by orjson from the same `_rounded`
    values, NaN as `null`.

    The page's numbers are not cut into a piece each: their orjson text is the format. All
    the buckets' floats (energy, average and maximum power, bucket after bucket) are written
    by one orjson call, as a flat array per system (`[[e,a,p,e,…],[…]]`); the commas become
    `%s`, and the brackets, found only between two systems, the text there with `%s`/`%d`
    where it differs (`]`: the first one's last bucket's end, totals and end, `_LAST`; `[`:
    the next one's id and the rest of its opening). One `%`-format then puts in the text
    between the numbers — pieces that exist already: the two keys between a bucket's floats
    (two shared objects) and what follows its maximum power up to the next bucket's energy
    (its count and the frame's text, kept per range for a bucket with all its samples;
    a system's arguments in a row are kept there too: `_Cuts`), each system's totals, id
    and opening. No object is made per number (a piece per number cost more than the rest
    of the writing), and no system's text is built by concatenation."""
    if hi <= lo:
        return list(around)
    many = readings.buckets
    frames = _frames(readings.time_ranges[lo:hi])
    b0, b1 = int(many.offsets[lo]), int(many.offsets[hi])
    energy, samples, power_max = many.energy_wh[b0:b1], many.samples[b0:b1], many.power_max_w[b0:b1]
    # Each system's totals as `_totals_body` writes them: the floats (None as null) by one
    # orjson call, the counts by `%d` (as orjson writes an int).
    floats = _split_list(totals.energy_wh[lo:hi] + totals.power_max_w[lo:hi])
    systems = hi - lo
    ranges = readings.time_ranges[lo:hi]
    samples_of, expected_of = totals.samples[lo:hi], totals.expected_samples[lo:hi]
    # Per range object and zone: the system's arguments for its buckets (`_Cuts.arguments`)
    # and what follows its id up to its first energy — its head as orjson writes its dict
    # (`timezone`, `from`, `to`) and the frame's text before the first number.
    kept: dict[tuple[int, str], tuple[_Cuts, bytes]] = {}
    used: list[_Cuts] = []  # per system
    args: list[Any] = [around[0]]
    # The ids as orjson writes them, without their quotes: one dump cut at `","` (in a
    # JSON string `"` is escaped, so `","` occurs only between two of them).
    ids = orjson.dumps(readings.system_ids[lo:hi])[2:-2].split(b'","')
    for k, frame, time_range, timezone in zip(
        range(systems), frames, ranges, readings.timezones[lo:hi], strict=True
    ):
        found = kept.get((id(time_range), timezone))
        if found is None:
            head = orjson.dumps({"timezone": timezone, "from": frame.first, "to": frame.last})
            cuts = _cuts(time_range) if frame.count else _NO_CUTS
            found = kept[id(time_range), timezone] = (
                cuts,
                b'",' + head[1:-1] + b',"data":[' + cuts.first,
            )
        cuts, opening = found
        used.append(cuts)
        args += (_NEXT, ids[k], opening)
        args += cuts.arguments
        args += (floats[k], floats[systems + k], samples_of[k], expected_of[k])
    if len(energy):
        # A bucket short of samples: what follows its maximum power (its count and the
        # frame's text up to the next energy) made here, in place of `_Cuts.arguments`'
        # text for a whole bucket. Its place among the arguments: per system 3 for its
        # opening, 3 per bucket (1 without any), 4 for its totals.
        short = np.flatnonzero(samples != np.concatenate([cuts.expected for cuts in used]))
        if len(short):
            counts = np.diff(many.offsets[lo : hi + 1])
            sizes = np.maximum(3 * counts, 1) + 4
            starts = np.cumsum(sizes) - sizes + 3 * np.arange(1, systems + 1)
            system = np.repeat(np.arange(systems), counts)[short]
            bucket = short - (many.offsets[lo:hi][system] - b0)
            places = (starts[system] + 3 * bucket + 3).tolist()
            texts = _sample_texts(samples[short]).tolist()
            for i, s, j, text in zip(places, system.tolist(), bucket.tolist(), texts, strict=True):
                args[i] = text + used[s].plain[j]
    rounded = _rounded(energy, _hours(frames), power_max).ravel()
    edges = (3 * (many.offsets[lo : hi + 1] - b0)).tolist()
    numbers = orjson.dumps([rounded[a:b] for a, b in itertools.pairwise(edges)], option=_NUMPY)
    # (no `%` in orjson's numbers: digits, `.`, `-`, `e`, `+`, `null`)
    text = numbers[2:-2].replace(b",", b"%s").replace(b"]", _LAST).replace(b"[", b"%s%s")
    args[1] = _FIRST  # (the page's first system: no comma before it)
    args.append(around[1])
    return [b"".join([b"%s%s%s%s", text, _LAST, b"%s"]) % tuple(args)]


def _hours(frames: list[_Frame]) -> FloatArray:
    """Each bucket's length in hours, the frames' buckets one after another."""
    return np.concatenate([frame.hours for frame in frames])


_AVERAGE_KEY = b',"power_avg_w":'
_MAXIMUM_KEY = b',"power_max_w":'
# `,"samples":` and a count as orjson writes it, for counts up to a month of quarter-hours.
_SAMPLE_TEXT = np.array([f',"samples":{n}'.encode() for n in range(31 * 100 + 1)], dtype=object)


def _sample_texts(samples: IntArray) -> npt.NDArray[np.object_]:
    """Per bucket `,"samples":` and its count (looked up; counts beyond the table written)."""
    if samples.min() >= 0 and samples.max() < len(_SAMPLE_TEXT):
        found: npt.NDArray[np.object_] = _SAMPLE_TEXT[samples]
        return found
    texts = [b',"samples":' + text for text in _split_array(samples)]
    written = np.empty(len(texts), dtype=object)
    written[:] = texts
    return written


@dataclass(frozen=True, slots=True)
class _Cuts:
    """A frame's text around its numbers, for `render_many`: `first` up to the first
    bucket's energy; per bucket j, `plain[j]` from its count up to bucket j + 1's energy
    (the last: to the end of the last bucket); `arguments`, per bucket the two keys between
    its floats and `plain[j]` after `,"samples":` and the count of a bucket with all its
    samples (`expected[j]`, the common case; `[b""]` without any bucket)."""

    first: bytes
    plain: list[bytes]
    expected: IntArray
    arguments: list[bytes]


def _cuts_size(cuts: _Cuts) -> int:
    return 200 * len(cuts.plain) + 256  # roughly the bytes it holds


@cached(LRUCache(maxsize=16 * 2**20, getsizeof=_cuts_size), lock=threading.Lock())
def _cuts(time_range: TimeRange) -> _Cuts:
    """The range's frame template cut at its placeholders (the labels and counts hold no
    `%`): every fourth cut is what follows a bucket's count."""
    pieces = _frame(time_range).template.split(b"%s")
    plain = pieces[4::4]
    expected = np.diff(time_range.edges()) // QUARTER_S
    full = [_SAMPLE_COUNT % (n, text) for n, text in zip(expected.tolist(), plain, strict=True)]
    arguments = [_AVERAGE_KEY, _MAXIMUM_KEY, b""] * len(full)
    arguments[2::3] = full
    return _Cuts(pieces[0], plain, expected, arguments)


_SAMPLE_COUNT = b',"samples":%d%s'
# A system without buckets: nothing before its `]`, one (empty) argument where a system's
# last bucket ends.
_NO_CUTS = _Cuts(b"", [], np.zeros(0, dtype=np.int64), [b""])

# After a system's last maximum power: its last bucket's end (`%s`), its totals as
# `_totals_body` is written by orjson, and its end; between two systems then `_NEXT`, the
# next one's id and the rest of its opening up to its first energy (`render_many`).
_LAST = b'%s],"totals":{"energy_wh":%s,"power_max_w":%s,"samples":%d,"expected_samples":%d}}'
_NEXT = b',{"system_id":"'
_FIRST = _NEXT[1:]


def _split_list(values: list[float | None]) -> list[bytes]:
    """Each value as orjson writes it (None as `null`): one dump, split at its commas."""
    if not values:
        return []
    pieces = orjson.dumps(values).split(b",")
    pieces[0] = pieces[0][1:]
    pieces[-1] = pieces[-1][:-1]
    return pieces


def _frames(time_ranges: tuple[TimeRange, ...]) -> list[_Frame]:
    """The frame of each range, looked up once per range object (systems of one zone share
    theirs: `portfolio.service` widens once per zone). By identity, not by value: a
    dataclass's hash is Python code, ~0.4 ms for a thousand systems; an equal range that is
    another object finds its frame in `_frame`'s cache."""
    found: dict[int, _Frame] = {}
    frames = []
    for time_range in time_ranges:
        frame = found.get(id(time_range))
        if frame is None:
            frame = found[id(time_range)] = _frame(time_range)
        frames.append(frame)
    return frames


def _template_args(
    energy: FloatArray, hours: FloatArray, power_max: FloatArray, samples: IntArray
) -> list[bytes]:
    """Every bucket's numbers as orjson writes them, in the order a frame's template takes
    them: energy, average power, maximum power, samples.

    The floats are rounded together (`_rounded`, as `Readings.each_bucket` has them, one row
    per bucket) and written in one orjson call as one flat array (`[e,a,p,e,a,p,…]`: the
    rows one after another, so every bucket's three numbers in template order), split at
    its commas with only the first and last piece's bracket cut off — no other pass over the
    text (a 2-D dump's `],[` turned into commas cost a copy and a scan of the whole text
    more, and writing rows is slower in orjson than one flat array)."""
    count = len(energy)
    args: list[bytes] = [b""] * (4 * count)
    if count:
        numbers = _split_array(_rounded(energy, hours, power_max).ravel())
        args[0::4] = numbers[0::3]
        args[1::4] = numbers[1::3]
        args[2::4] = numbers[2::3]
        args[3::4] = _split_array(samples)
    return args


def _split_array(values: npt.NDArray[Any]) -> list[bytes]:
    """Each value of a non-empty 1-D array as orjson writes it (NaN as `null`): one dump,
    split at its commas, the brackets cut off the first and last piece."""
    pieces = orjson.dumps(values, option=_NUMPY).split(b",")
    pieces[0] = pieces[0][1:]
    pieces[-1] = pieces[-1][:-1]  # (the same piece as the first for one value: both cut)
    return pieces


def _rounded(
    energy: FloatArray, hours: FloatArray, power_max: FloatArray
) -> npt.NDArray[np.floating[Any]]:
    """Per bucket (a row each): energy, average power, maximum power, rounded to 3 decimals
    (NaN: no value). Filled column by column and rounded in place (the same values as
    `np.round(np.stack(…), 3)`, without the two wrappers' Python overhead)."""
    figures = np.empty((len(energy), 3))
    figures[:, 0] = energy
    np.divide(energy, hours, out=figures[:, 1])
    figures[:, 2] = power_max
    return figures.round(3, out=figures)


def _data(buckets: EnergySeries, frame: _Frame) -> bytes:
    if not frame.count:
        return b""
    args = _template_args(buckets.energy_wh, frame.hours, buckets.power_max_w, buckets.samples)
    return frame.template % tuple(args)


def _totals_body(totals: Totals) -> dict[str, Any]:
    return {
        "energy_wh": totals.energy_wh,
        "power_max_w": totals.power_max_w,
        "samples": totals.samples,
        "expected_samples": totals.expected_samples,
    }


def _totals(buckets: EnergySeries, frame: _Frame) -> Totals:
    return totals_of(buckets, frame.expected_samples)


def totals_of(series: EnergySeries, expected_samples: int) -> Totals:
    """The totals of a series: its energy (rounded as rendered; None without a sample),
    largest power, samples, and the quarter-hours it should have had."""
    # `ndarray.sum` is this reduction behind a Python-level wrapper.
    samples = int(np.add.reduce(series.samples))
    powers = series.power_max_w
    if not len(series.starts):
        power_max = math.nan
    else:
        # The largest power found by its place (`argmax` is a plain loop; a ufunc's
        # reduction costs ~10k instructions of dispatch on a day of hours): the value `max`
        # gives, but for its sign where it is zero — then `max` itself. NaN (`argmax` finds
        # the first) where an entry has none: then `fmax`, which skips NaN (an entry without
        # a reported power) and is NaN only when all are.
        power_max = float(powers[powers.argmax()])
        if power_max == 0.0:
            power_max = float(np.maximum.reduce(powers))
        elif math.isnan(power_max):
            power_max = float(np.fmax.reduce(powers))
    return Totals(  # (by position: energy_wh, power_max_w, samples, expected_samples)
        round(_nansum(series.energy_wh), 3) if samples else None,
        None if math.isnan(power_max) else round(power_max, 3),
        samples,
        expected_samples,
    )


def _nansum(values: FloatArray) -> float:
    """`np.nansum` (the same sum of the same array, NaN as 0) without its Python-level
    overhead, several times the sum itself on a day of hours. Without a NaN the array is
    summed as it is (the same contiguous array, so the same sum); a NaN sum (a NaN in it, or
    infinities of both signs) takes the way with NaN as 0."""
    total = float(np.add.reduce(values)) if values.flags.c_contiguous else math.nan
    if math.isnan(total):  # (`np.add.reduce` is `sum` without its Python wrapper)
        total = float(np.add.reduce(np.where(np.isnan(values), 0.0, values)))
    return total


def _many_totals(many: ManyBuckets, frames: list[_Frame]) -> ManyTotals:
    """`_totals` of every series at once, with the same results: the samples and the largest
    power are exact whatever the order; the energy is summed as `_nansum` sums one series —
    numpy's `sum` starts from 0 and adds the whole array pairwise, which is what `reduceat`
    does over a segment that starts with a 0 (a plain `reduceat` starts from the segment's
    first value and rounds differently), so each segment gets a 0 in front."""
    counts = np.diff(many.offsets)
    filled = counts > 0
    starts = many.offsets[:-1][filled]
    samples = np.zeros(len(counts), dtype=np.int64)
    energy = np.zeros(len(counts))
    power_max = np.full(len(counts), np.nan)
    if len(starts):
        samples[filled] = np.add.reduceat(many.samples, starts)
        known = np.where(np.isnan(many.energy_wh), 0.0, many.energy_wh)
        padded = np.insert(known, starts, 0.0)
        energy[filled] = np.add.reduceat(padded, starts + np.arange(len(starts)))
        power_max[filled] = np.fmax.reduceat(many.power_max_w, starts)
    # Rounded as `_totals` rounds one (`round_3`), None where it has None: no sample, no power.
    energies = cast("list[float | None]", round_3(energy))
    for k in np.flatnonzero(samples == 0).tolist():
        energies[k] = None
    peaks = cast("list[float | None]", round_3(power_max))
    for k in np.flatnonzero(np.isnan(power_max)).tolist():
        peaks[k] = None
    return ManyTotals(
        energies, peaks, samples.tolist(), [frame.expected_samples for frame in frames]
    )


def round_3(values: FloatArray) -> list[float]:
    """`round(value, 3)` of each value, the same floats, without a Python `round` for each
    (it writes and parses a decimal string: ~0.3 µs a value).

    Python's `round` is the double nearest to n / 1000, n the integer nearest to the exact
    value × 1000 (half to even); `rint(fl(value × 1000)) / 1000` is the nearest double to
    n' / 1000 (an exact integer divided, correctly rounded), so the same double where n' = n.
    fl(value × 1000) is within half an ulp of the exact product, so n' = n unless it lies
    within an ulp of a half-integer (either could be nearer): there, and where the product
    is not below 2**52 (or not finite, NaN included), the value goes through `round`."""
    with np.errstate(all="ignore"):  # (infinities and NaN are left to `round`)
        scaled = values * 1000.0
        integers = np.rint(scaled)
        found: list[float] = (integers / 1000.0).tolist()
        magnitude = np.abs(scaled)
        clear = (magnitude < 2.0**52) & (
            np.abs(np.abs(scaled - integers) - 0.5) > np.spacing(magnitude)
        )
    if not bool(clear.all()):
        for k in np.flatnonzero(~clear).tolist():
            found[k] = round(float(values[k]), 3)
    return found


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see `kit.grid.TimeRange`
class _Frame:
    """The data-independent text of a range's buckets: `template` holds, per bucket, its
    `start`, `end` and `expected_samples` written out and `%s` where its numbers go —
    energy, average power, maximum power, samples (`_template_args`) — so a body is one
    %-format of it."""

    count: int
    template: bytes
    hours: FloatArray  # each bucket's length in hours
    expected_samples: int
    first: str
    last: str


def _frame_size(frame: _Frame) -> int:
    return 192 * frame.count + 256  # roughly the bytes it holds


def _frame(time_range: TimeRange) -> _Frame:
    """The frame of a range (see `_Frame`), found by its ends, interval and zone in
    `_FRAMES` (a look-up of a tuple, not of a dataclass: see `_frames`), else made and kept
    there: a range of equal buckets (`15m`, `30m`, `1h` away from a clock change) cut from
    the kept text of its stretch of the grid (`_strip_frame`), any other written in one
    pass (`_written_frame`)."""
    # A range on the UTC grid has the same frame in every zone (UTC labels, equal buckets):
    # kept once for all of them (`None` for its zone).
    step = time_range.uniform_step
    tz = None if step is not None else time_range.tz
    key = (time_range.start_s, time_range.end_s, time_range.interval, tz)
    frame = _FRAMES.get(key)
    if frame is not None:
        return frame
    if step is not None:  # equal buckets by construction: nothing to compare
        frame = _strip_frame(
            time_range.start_s, (time_range.end_s - time_range.start_s) // step, step
        )
    else:
        frame = _kept_day_frame(time_range) if time_range.interval is Interval.DAY else None
        if frame is None:
            edges = time_range.edges()
            step = time_range.interval.fixed_seconds
            equal = None if step is None else _equal_strip_frame(edges, step)
            frame = _written_frame(edges) if equal is None else equal
    global _frames_bytes  # (a running total, reset with the dict)
    if _frames_bytes > _FRAMES_BYTES:
        _FRAMES.clear()
        _frames_bytes = 0
    _FRAMES[key] = frame
    _frames_bytes += _frame_size(frame)
    return frame


# A range's frame is a pure function of it, so kept without any invalidation until the
# frames hold `_FRAMES_BYTES` (a 10,000-bucket range's ~1.9 MB; then all are dropped: a
# frame is made again in a few µs). A fleet's uncached reads make a new one per request. A
# plain dict (no LRU and no lock: its hits were a dataclass's hash, a lock and a `cached`
# wrapper, its misses an exception too); the event loop and a thread that renders may make
# one twice, harmlessly.
_FRAMES: dict[tuple[int, int, Interval, ZoneInfo | None], _Frame] = {}
_FRAMES_BYTES = 48 * 2**20
_frames_bytes = 0


def _written_frame(edges: IntArray) -> _Frame:
    """The frame of the buckets between `edges`: one f-string per bucket (`_bucket_texts`),
    encoded once (the labels and counts hold no `%`)."""
    texts, lengths, expected, labels = _bucket_texts(edges)
    return _Frame(
        count=len(expected),
        template=",".join(texts).encode(),
        hours=lengths / 3600.0,
        expected_samples=int(sum(expected)),
        first=labels[0],
        last=labels[-1],
    )


def _bucket_texts(edges: IntArray) -> tuple[list[str], IntArray, list[int], list[str]]:
    """Each bucket's text between `edges` (its labels and expected samples written, `%s`
    for its numbers), the buckets' lengths (seconds), their expected samples and the
    edges' labels."""
    lengths = edges[1:] - edges[:-1]  # `np.diff` without its Python wrapper
    expected = (lengths // QUARTER_S).tolist()
    labels = iso_strings(edges)
    texts = [
        f'{{"start":"{start}","end":"{end}","energy_wh":%s,"power_avg_w":%s,'
        f'"power_max_w":%s,"samples":%s,"expected_samples":{bucket_expected}}}'
        for start, end, bucket_expected in zip(labels, labels[1:], expected, strict=False)
    ]
    return texts, lengths, expected, labels


def _kept_day_frame(time_range: TimeRange) -> _Frame | None:
    """The frame of a range of local days cut from the kept text of its zone's block of days
    (`kit.grid.kept_days`, `_day_text`): the text `_written_frame` writes for the same
    edges, without a label, a count or a bucket's text written (a month of days' 30
    f-strings, their join and labels were ~40 % of rendering it). None when the range's
    ends are not both in the block."""
    kept = kept_days(time_range.start_s, time_range.tz)
    midnights = kept.midnights
    first = bisect.bisect_left(midnights, time_range.start_s)
    last = bisect.bisect_left(midnights, time_range.end_s)
    if (
        last >= len(midnights)
        or last <= first
        or midnights[first] != time_range.start_s
        or midnights[last] != time_range.end_s
    ):
        return None
    text, at, hours, expected = _day_text(kept)
    start, end = at[first], at[last]
    return _Frame(
        count=last - first,
        template=text[start : end - 1],  # (each bucket's text is followed by `,`)
        hours=hours[first:last],
        expected_samples=expected[last] - expected[first],
        first=text[start + _START_AT : start + _START_AT + _LABEL].decode(),
        last=text[at[last - 1] + _END_AT : at[last - 1] + _END_AT + _LABEL].decode(),
    )


@functools.lru_cache(maxsize=32)
def _day_text(kept: KeptDays) -> tuple[bytes, list[int], FloatArray, list[int]]:
    """A block of local days as `_written_frame` writes them (`_bucket_texts`), each
    bucket's text followed by `,`: the text, where each bucket's text starts (and, last,
    where the text ends), the buckets' lengths in hours (read-only) and the running sum of
    their expected samples from the block's first day (~190 kB in all for ~820 days). Kept
    per block object (`kit.grid` keeps a block as long as it is asked for)."""
    texts, lengths, expected, _ = _bucket_texts(kept.edges)
    at = [0, *itertools.accumulate(len(text) + 1 for text in texts)]  # (ASCII: a byte each)
    hours = lengths / 3600.0
    hours.flags.writeable = False
    text = ("".join(text + "," for text in texts)).encode()
    return text, at, hours, [0, *itertools.accumulate(expected)]


# Buckets per kept stretch of a fixed grid (`_strip`): 256 hours are ~11 days.
_STRIP = 256
# Where a bucket's text holds its labels: `{"start":"` is 10 bytes, the label 20,
# `","end":"` 9.
_START_AT = 10
_END_AT = 39
_LABEL = 20


def _equal_strip_frame(edges: IntArray, step: int) -> _Frame | None:
    """`_strip_frame` of the buckets between `edges` if they are all `step` seconds long,
    else None (buckets of unequal length: a clock change; or no bucket)."""
    first_s, count = int(edges[0]), len(edges) - 1
    if (
        count < 1
        or int(edges[-1]) - first_s != count * step
        or (edges[1:] - edges[:-1] != step).any()
    ):
        return None
    return _strip_frame(first_s, count, step)


def _strip_frame(first_s: int, count: int, step: int) -> _Frame:
    """The frame of `count` (≥ 1) buckets of `step` seconds from `first_s` on, cut from the
    kept text of the stretches of the grid they lie in — the text `_written_frame` writes
    for them, every bucket's the same length."""
    phase = first_s % step
    q0 = (first_s - phase) // step
    q1 = q0 + count
    pieces = []
    for block in range(q0 // _STRIP, (q1 - 1) // _STRIP + 1):
        strip, width = _STRIPS.get((step, phase, block)) or _strip(step, phase, block)
        lo = max(q0, block * _STRIP) - block * _STRIP
        hi = min(q1, (block + 1) * _STRIP) - block * _STRIP
        pieces.append(strip[lo * width : hi * width])
    template = b"".join(pieces)[:-1]  # each bucket's text is followed by `,`
    last = len(template) - width + 1  # where the last bucket's text starts
    return _Frame(
        count=count,
        template=template,
        hours=_equal_hours(count, step),
        expected_samples=count * (step // QUARTER_S),
        first=template[_START_AT : _START_AT + _LABEL].decode(),
        last=template[last + _END_AT : last + _END_AT + _LABEL].decode(),
    )


@functools.lru_cache(maxsize=256)
def _equal_hours(count: int, step: int) -> FloatArray:
    """`count` buckets' lengths in hours, each `step` seconds: kept (a fleet's frames are of
    a few lengths), so shared and read-only."""
    hours = np.full(count, step / 3600.0)
    hours.flags.writeable = False
    return hours


def _strip(step: int, phase: int, block: int) -> tuple[bytes, int]:
    """The text of `_STRIP` buckets of `step` seconds, from `phase + step · _STRIP · block`
    on, each followed by `,`, and the length of one such (the same for all: labels of
    20 characters, one count); kept in `_STRIPS`."""
    start = phase + step * _STRIP * block
    edges = np.arange(start, start + step * (_STRIP + 1), step, dtype=np.int64)
    text = _written_frame(edges).template + b","
    width = len(text) // _STRIP
    assert width * _STRIP == len(text)  # every bucket's text the same length
    if len(_STRIPS) >= _STRIPS_KEPT:
        _STRIPS.clear()
    _STRIPS[step, phase, block] = text, width
    return text, width


# Stretches of the grid kept (~40 kB each for `15m`: 10 MB); a pure function of the key.
_STRIPS: dict[tuple[int, int, int], tuple[bytes, int]] = {}
_STRIPS_KEPT = 256
