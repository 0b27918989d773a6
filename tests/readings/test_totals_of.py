"""`totals_of` calls numpy's reductions as the ufuncs' own (`np.add.reduce`,
`np.maximum.reduce`), not through `ndarray.sum`/`.max`: the same totals as those, bit for
bit, on random series — gaps (NaN), ±0.0, infinities, missing powers, empty series, lengths
around numpy's pairwise blocks, strided views, other integer types of samples."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.kit.grid import EnergySeries
from solarapi.readings.rendering import Totals, _nansum, totals_of


def _as_before(series: EnergySeries, expected_samples: int) -> Totals:
    """`totals_of` as it was written with `ndarray.sum`, `.max` and `np.nansum`'s rule."""
    samples = int(series.samples.sum())
    if not len(series):
        power_max = math.nan
    else:
        power_max = float(series.power_max_w.max())
        if math.isnan(power_max):
            power_max = float(np.fmax.reduce(series.power_max_w))
    values = series.energy_wh
    total = float(values.sum()) if values.flags.c_contiguous else math.nan
    if math.isnan(total):
        total = float(np.where(np.isnan(values), 0.0, values).sum())
    return Totals(
        energy_wh=round(total, 3) if samples else None,
        power_max_w=None if math.isnan(power_max) else round(power_max, 3),
        samples=samples,
        expected_samples=expected_samples,
    )


# (+∞ and −∞ in one sum warn "invalid value", either way: left out of the energies)
_ENERGY = st.one_of(
    st.floats(min_value=0, max_value=1e6),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, 0.1, 1e-9]),
)
_POWER = st.one_of(
    st.floats(min_value=-1e3, max_value=1e6),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf]),
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(_ENERGY, st.integers(0, 8), _POWER), max_size=300),
    st.sampled_from([np.int64, np.int32]),
    st.booleans(),
)
def test_totals_as_ndarray_methods_give_them(
    rows: list[tuple[float, int, float]], sample_type: type[np.signedinteger], strided: bool
) -> None:
    energy: npt.NDArray[np.float64] = np.array([r[0] for r in rows], dtype=np.float64)
    samples = np.array([r[1] for r in rows], dtype=sample_type)
    power: npt.NDArray[np.float64] = np.array([r[2] for r in rows], dtype=np.float64)
    starts = np.arange(len(rows), dtype=np.int64) * 3600
    if strided:  # every other entry: views that are not contiguous
        starts, energy, samples, power = starts[::2], energy[::2], samples[::2], power[::2]
    series = EnergySeries(starts, energy, samples, power)
    got, want = totals_of(series, 7), _as_before(series, 7)
    assert got.samples == want.samples
    assert type(got.samples) is int
    assert got.expected_samples == want.expected_samples
    for mine, theirs in ((got.energy_wh, want.energy_wh), (got.power_max_w, want.power_max_w)):
        if theirs is None or mine is None:
            assert mine is theirs
        elif math.isnan(theirs):
            assert math.isnan(mine)
        else:
            assert math.copysign(1.0, mine) == math.copysign(1.0, theirs)
            assert mine == theirs
    if len(energy) and energy.flags.c_contiguous:
        assert _nansum(energy) == float(energy.sum()) or math.isnan(float(energy.sum()))
