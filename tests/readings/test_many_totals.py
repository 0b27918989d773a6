"""The portfolio's vectorised totals (`_many_totals`, all systems at once) equal the
per-system endpoint's (`_totals`, one system), bit for bit before rounding: random series of
many lengths (pairwise summation groups differently from 8 and 128 values on), gaps, missing
powers, empty series."""

from __future__ import annotations

import math

import numpy as np

from solarapi.kit.grid import EnergySeries, ManyBuckets
from solarapi.readings.rendering import _Frame, _many_totals, _nansum, _totals, round_3


def _frame(count: int) -> _Frame:
    return _Frame(count, b"", np.ones(count), 4 * count, "", "")


def test_many_totals_equal_one_series_totals() -> None:
    rng = np.random.default_rng(29)
    lengths = [0, 1, 2, 7, 8, 9, 31, 127, 128, 129, 300, 1000, 8193, 10_000]
    lengths += [int(n) for n in rng.integers(0, 400, 200)]
    series = []
    for n in lengths:
        energy = rng.random(n) * 10.0 ** int(rng.integers(-2, 6))
        energy[rng.random(n) < 0.2] = np.nan  # gaps
        energy[rng.random(n) < 0.1] = 0.1
        samples = np.where(np.isnan(energy), 0, rng.integers(1, 5, n)).astype(np.int64)
        power = rng.random(n) * 5000
        power[rng.random(n) < 0.3] = np.nan
        if n and rng.random() < 0.1:
            power[:] = np.nan  # no power reported at all
        series.append((energy, samples, power))
    offsets = np.zeros(len(series) + 1, dtype=np.int64)
    np.cumsum([len(e) for e, _, _ in series], out=offsets[1:])
    many = ManyBuckets(
        tuple(np.zeros(len(e) + 1, dtype=np.int64) for e, _, _ in series),
        offsets,
        np.concatenate([e for e, _, _ in series]),
        np.concatenate([s for _, s, _ in series]),
        np.concatenate([p for _, _, p in series]),
    )
    frames = [_frame(len(e)) for e, _, _ in series]
    totals = _many_totals(many, frames)
    for k, (energy, samples, power) in enumerate(series):
        one = _totals(EnergySeries(many.edges[k][:-1], energy, samples, power), frames[k])
        assert totals[k].energy_wh == one.energy_wh, k
        assert totals[k].power_max_w == one.power_max_w, k
        assert totals[k].samples == one.samples, k
        assert totals[k].expected_samples == one.expected_samples, k
    # Unrounded too: the summation itself is the same, not only after rounding.
    known = np.where(np.isnan(many.energy_wh), 0.0, many.energy_wh)
    starts = offsets[:-1][np.diff(offsets) > 0]
    sums = np.add.reduceat(np.insert(known, starts, 0.0), starts + np.arange(len(starts)))
    nonempty = [e for e, _, _ in series if len(e)]
    assert [float(x) for x in sums] == [_nansum(e) for e in nonempty]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


def test_round_3_is_pythons_round() -> None:
    """`round_3` (the totals' rounding of a fleet at once) gives Python's `round(v, 3)`
    bit for bit: random magnitudes, exact halves of a thousandth and their neighbours (where
    the scaled product's rounding could tip the other way), values beyond 2**52 / 1000,
    signed zeros, infinities, NaN, subnormals and random bit patterns."""
    rng = np.random.default_rng(3)
    halves = (rng.integers(-(10**12), 10**12, 50_000) + 0.5) / 1000.0
    values = np.concatenate(
        [
            rng.uniform(-1e6, 1e6, 50_000),
            np.exp(rng.uniform(-40, 40, 50_000)),
            (np.arange(-50_000, 50_000) + 0.5) / 1000.0,
            halves,
            np.nextafter(halves, np.inf),
            np.nextafter(halves, -np.inf),
            rng.integers(0, 2**63, 50_000, dtype=np.int64).view(np.float64),
            np.array(
                [0.0, -0.0, np.nan, np.inf, -np.inf, 1e300, -1e-300, 5e-324, 2.0**52 / 1000,
                 4.5e12 + 0.25, 0.0005, -0.0005, 0.0015, 1.0005, 2.675, -2.675]
            ),
        ]
    )  # fmt: skip
    found = round_3(values)
    assert len(found) == len(values)
    wrong = [
        (float(v), f)
        for v, f in zip(values.tolist(), found, strict=True)
        if not _same(f, round(v, 3))
    ]
    assert wrong == []
