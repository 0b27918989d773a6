"""The portfolio's vectorised totals (`_many_totals`, all systems at once) equal the
per-system endpoint's (`_totals`, one system), bit for bit before rounding: random series of
many lengths (pairwise summation groups differently from 8 and 128 values on), gaps, missing
powers, empty series."""

from __future__ import annotations

import numpy as np

from solarapi.kit.grid import EnergySeries, ManyBuckets
from solarapi.readings.rendering import _Frame, _many_totals, _nansum, _totals


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
