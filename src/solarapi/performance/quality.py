"""Data-quality flags per bucket, from the quarter-hours themselves (pure numpy).

pvanalytics was the first choice; it is not used because version 0.2.2 (the current one)
does not work with the locked pandas 3: `features.daytime` calls
`pandas.core.window.RollingGroupby`, which pandas 3 removed, and `quality.time`'s shift
detection builds on it; importing the package also loads scikit-image and statsmodels
(~25 MB, 12 s to import here) for its shading module. Each rule below is a few array
operations on the grid we already have; docs/performance.md gives the thresholds.

- `gap`: coverage (samples ÷ expected samples) < 0.95.
- `clipping`: with an inverter rating, ≥ 2 quarter-hours within 2 % of its AC limit
  (`inverter_capacity_kw × 250 Wh`); without one, ≥ 3 consecutive quarter-hours within
  0.5 % of their day's maximum while the clear-sky model still changes by > 5 % over them,
  each within the clear-sky bound (the sun could have given more) and of ≥ 20 meter steps
  (as `stuck`).
- `stuck`: ≥ 4 consecutive quarter-hours with the same non-zero energy that are not clipping
  (without a rating: nor a plateau at the day's maximum within the clear-sky bound), and at
  least 20 of the meter's steps (the gcd of the day's values: 10 Wh for a meter counting in
  10 Wh), below which a repeat is the meter's resolution.
- `outlier`: a quarter-hour above the clear-sky bound (`Modelled.clear_sky_bound_wh`:
  capacity × the larger of clear-sky POA and clear-sky GHI × 1.3, plus 1 % of the capacity
  for meter noise at night).
- `time_shift`: the lag (in quarter-hours, ±3 h) that best aligns production with the
  model's curves (which know the panel's orientation) is ≥ 45 minutes: the median over the
  bucket's clear days (≥ 90 % of daylight quarter-hours with readings, correlation with the
  clear-sky curve at its best lag ≥ 0.98) of the mean of the lags against the clear-sky and
  the typical-sky curve; else, with no clear day, the lag of the sum of its ≥ 3 covered days
  against the sum of the typical sky's curve (correlation ≥ 0.9), in which clouds average
  out. Not the clear sky alone: clouds give an east or west roof diffuse light all day, which
  its clear-sky curve (beam in the morning or the evening) lacks, while a clear day has less
  of it than the typical sky; against the clear sky alone a healthy east roof's cloudy weeks
  looked 30–45 minutes late and half-clear days an hour off, and a real hour's error one way
  went unseen. docs/performance.md gives the measured rates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from solarapi.kit.grid import QUARTER_S, FloatArray, IntArray

FLAGS = ("gap", "clipping", "stuck", "outlier", "time_shift")
MIN_COVERAGE = 0.95
CLIP_TOLERANCE = 0.02
CLIP_MIN_QUARTERS = 2
FLAT_TOLERANCE = 0.005
FLAT_MIN_QUARTERS = 3
STUCK_MIN_QUARTERS = 4
STUCK_MIN_STEPS = 20  # a repeated value must be ≥ this many of its meter's steps
NOISE_SHARE_OF_CAPACITY = 0.01
MAX_LAG_QUARTERS = 12
SHIFT_QUARTERS = 3  # 45 minutes
MIN_DAY_COVERAGE = 0.9
MIN_CORRELATION = 0.98
MIN_PROFILE_DAYS = 3
MIN_PROFILE_CORRELATION = 0.9

BoolArray = npt.NDArray[np.bool_]


def quality_flags(
    *,
    bucket: IntArray,
    bucket_count: int,
    coverage: FloatArray,
    day: IntArray,
    day_count: int,
    day_slot: IntArray,
    energy_wh: FloatArray,
    clear_sky_bound_wh: FloatArray,
    clear_sky_expected_wh: FloatArray,
    typical_expected_wh: FloatArray,
    capacity_kwp: float,
    inverter_capacity_kw: float | None,
    whole_days: bool = True,
) -> list[tuple[str, ...]]:
    """The flags of each bucket. Per quarter-hour: `bucket` and `day` (indices of its bucket
    and its local day, −1 outside), `day_slot` (its place in the day), the measured energy
    (NaN = no reading) and the clear and typical sky's figures; per bucket: `coverage`.
    `time_shift` is a property of a day's curve: looked for only when every bucket is made
    of whole days (`whole_days`)."""
    has = ~np.isnan(energy_wh)
    energy = np.where(has, energy_wh, 0.0)
    # Without a rating, the runs at the day's maximum: where clipping is looked for, and what
    # `stuck` leaves to it.
    flat_top = None if inverter_capacity_kw is not None else _flat_top(energy, has, day)
    clipping = _clipping(
        energy, has, day, clear_sky_expected_wh, clear_sky_bound_wh, inverter_capacity_kw, flat_top
    )
    stuck = _runs(has & (energy > 0) & _same_as_previous(energy, has), STUCK_MIN_QUARTERS - 1)
    stuck &= ~clipping
    if flat_top is not None:
        # Without a rating, identical values at the day's maximum that the clear sky could
        # give are a limit's plateau, not a frozen logger, even around noon, where the sun's
        # own curve is too flat to call them clipping.
        stuck &= ~(flat_top & (energy <= clear_sky_bound_wh))
    if stuck.any():
        stuck &= _resolved(energy, has, day, stuck)
    noise_wh = capacity_kwp * 1000 * (QUARTER_S / 3600) * NOISE_SHARE_OF_CAPACITY
    outlier = has & (energy > clear_sky_bound_wh + noise_wh)
    flags: list[list[str]] = [[] for _ in range(bucket_count)]
    inside = (bucket >= 0) & (bucket < bucket_count)

    def mark(name: str, where: BoolArray) -> None:
        for index in np.unique(bucket[where & inside]).tolist():
            flags[index].append(name)

    for index in np.flatnonzero(coverage < MIN_COVERAGE).tolist():
        flags[index].append("gap")
    mark("clipping", clipping)
    mark("stuck", stuck)
    mark("outlier", outlier)
    shifted = (
        _shifted_buckets(
            bucket,
            bucket_count,
            day,
            day_count,
            day_slot,
            energy,
            has,
            clear_sky_expected_wh,
            typical_expected_wh,
        )
        if whole_days
        else []
    )
    for index in shifted:
        flags[index].append("time_shift")
    return [tuple(names) for names in flags]


def _same_as_previous(energy: FloatArray, has: BoolArray) -> BoolArray:
    same = np.zeros(len(energy), dtype=bool)
    same[1:] = has[1:] & has[:-1] & (energy[1:] == energy[:-1])
    return same


def _runs(link: BoolArray, links: int) -> BoolArray:
    """Quarter-hours inside a run of ≥ `links` consecutive links (`link[i]`: i joins i − 1),
    i.e. of ≥ links + 1 quarter-hours."""
    result = np.zeros(len(link), dtype=bool)
    if links <= 0 or len(link) == 0:
        return result
    padded = np.concatenate(([False], link, [False])).astype(np.int8)
    edges = np.diff(padded)
    run_starts = np.flatnonzero(edges == 1)
    run_ends = np.flatnonzero(edges == -1)
    for lo, hi in zip(run_starts.tolist(), run_ends.tolist(), strict=True):
        if hi - lo >= links:
            result[lo - 1 : hi] = True
    return result


def _clipping(
    energy: FloatArray,
    has: BoolArray,
    day: IntArray,
    clear_sky_expected_wh: FloatArray,
    clear_sky_bound_wh: FloatArray,
    inverter_capacity_kw: float | None,
    flat_top: BoolArray | None,
) -> BoolArray:
    """Clipped quarter-hours: near the inverter's limit when it is rated, else within
    `flat_top` (`_flat_top`, given exactly when it is not rated) where the sun still changes."""
    if inverter_capacity_kw is not None:
        limit_wh = inverter_capacity_kw * 1000 * (QUARTER_S / 3600)
        near = has & (np.abs(energy - limit_wh) <= CLIP_TOLERANCE * limit_wh) & (day >= 0)
        # A day is flagged by two such quarter-hours; a lone one is a bright moment.
        per_day = np.bincount(day[near], minlength=max(int(day.max()) + 1, 1) if len(day) else 1)
        result: BoolArray = near & (per_day[np.maximum(day, 0)] >= CLIP_MIN_QUARTERS)
        return result
    # No rating: a flat top at the day's maximum while the clear sky still changes.
    assert flat_top is not None
    flat = flat_top.copy()
    if not flat.any():
        return flat
    # A flat top of a coarse meter (300, 300, 300 Wh in 100 Wh steps) is its resolution.
    flat &= _resolved(energy, has, day, flat)
    # The clear sky over the flat run must vary, else it is a plateau of the sun itself.
    clear = clear_sky_expected_wh
    varies = np.zeros(len(energy), dtype=bool)
    for d in np.unique(day[flat]).tolist():
        in_run = flat & (day == d)
        values = clear[in_run]
        if values.max() > 0 and (values.max() - values.min()) > 0.05 * values.max():
            varies |= in_run
    # Clipping cuts what the sun could give: where even the clear sky's bound could not give
    # the value (a logger frozen at noon's value into the evening), it is not clipping.
    clipped: BoolArray = flat & varies & (energy <= clear_sky_bound_wh)
    return clipped


def _resolved(energy: FloatArray, has: BoolArray, day: IntArray, candidate: BoolArray) -> BoolArray:
    """Whether each `candidate` quarter-hour's value is ≥ STUCK_MIN_STEPS of its day's meter
    step: the greatest common divisor of the day's distinct non-zero values (in mWh), unknown
    (0: any value counts) with fewer than two. A meter counting in 10 Wh repeats 70 Wh on a
    dull hour as a matter of course; that is its resolution, not a frozen logger."""
    result = np.ones(len(energy), dtype=bool)
    for d in np.unique(day[candidate & (day >= 0)]).tolist():
        today = has & (day == d) & (energy > 0)
        values = np.unique(np.round(energy[today] * 1000).astype(np.int64))
        step_wh = float(np.gcd.reduce(values)) / 1000 if len(values) >= 2 else 0.0
        result[today] = energy[today] >= STUCK_MIN_STEPS * step_wh
    return result


def _flat_top(energy: FloatArray, has: BoolArray, day: IntArray) -> BoolArray:
    """Quarter-hours in a run of ≥ 3 consecutive ones within 0.5 % of their day's maximum."""
    day_max = np.zeros(len(energy))
    valid = day >= 0
    if valid.any():
        maxima = np.zeros(int(day[valid].max()) + 1)
        np.maximum.at(maxima, day[valid], energy[valid])
        day_max[valid] = maxima[day[valid]]
    top = has & (energy > 0) & (energy >= (1 - FLAT_TOLERANCE) * day_max)
    link = np.zeros(len(energy), dtype=bool)
    link[1:] = top[1:] & top[:-1] & (day[1:] == day[:-1])
    return _runs(link, FLAT_MIN_QUARTERS - 1)


def _shifted_buckets(
    bucket: IntArray,
    bucket_count: int,
    day: IntArray,
    day_count: int,
    day_slot: IntArray,
    energy: FloatArray,
    has: BoolArray,
    clear_reference: FloatArray,
    typical_reference: FloatArray,
) -> list[int]:
    if day_count == 0:
        return []
    inside = (day >= 0) & (day < day_count) & (day_slot >= 0) & (day_slot < 100)
    width = 100 + 2 * MAX_LAG_QUARTERS
    actual = np.zeros((day_count, 100))
    expected = np.zeros((day_count, width))
    typical = np.zeros((day_count, width))
    measured = np.zeros((day_count, 100), dtype=bool)
    actual[day[inside], day_slot[inside]] = energy[inside]
    measured[day[inside], day_slot[inside]] = has[inside]
    expected[day[inside], day_slot[inside] + MAX_LAG_QUARTERS] = clear_reference[inside]
    typical[day[inside], day_slot[inside] + MAX_LAG_QUARTERS] = typical_reference[inside]
    daylight = expected[:, MAX_LAG_QUARTERS : MAX_LAG_QUARTERS + 100] > 0
    daylight_count = daylight.sum(axis=1)
    covered = (daylight & measured).sum(axis=1) >= MIN_DAY_COVERAGE * np.maximum(daylight_count, 1)
    clear_lag, best_corr = _best_lags(actual, expected)
    clear_day = covered & _producing(actual, daylight_count) & (best_corr >= MIN_CORRELATION)
    # A clear day's own curve lies between the clear sky's (all beam: an east roof's peaks in
    # the morning) and the typical sky's (much diffuse light, spread over the day): the lag
    # is the mean of the lags against both, unbiased for any orientation.
    typical_lag, _ = _best_lags(actual, typical)
    best_lag = (clear_lag + typical_lag) / 2
    # A day's bucket: the bucket of its quarter-hours (a day lies within one bucket).
    day_bucket = np.full(day_count, -1)
    day_bucket[day[inside]] = bucket[inside]
    shifted: list[int] = []
    for index in range(bucket_count):
        here = day_bucket == index
        lags_here = best_lag[clear_day & here]
        if len(lags_here):
            lag = float(np.median(lags_here))
        else:
            # No clear day: the bucket's covered days summed, where clouds average out, against
            # the typical sky's curve (ordinary days' diffuse light included).
            days = covered & _producing(actual, daylight_count) & here
            if int(days.sum()) < MIN_PROFILE_DAYS:
                continue
            profile_lag, profile_corr = _best_lags(
                actual[days].sum(axis=0, keepdims=True), typical[days].sum(axis=0, keepdims=True)
            )
            if profile_corr[0] < MIN_PROFILE_CORRELATION:
                continue
            lag = float(profile_lag[0])
        if abs(lag) >= SHIFT_QUARTERS:
            shifted.append(index)
    return shifted


def _producing(actual: FloatArray, daylight_count: IntArray) -> BoolArray:
    result: BoolArray = (daylight_count > 0) & (actual.sum(axis=1) > 0)
    return result


def _best_lags(actual: FloatArray, expected: FloatArray) -> tuple[IntArray, FloatArray]:
    """Per row: the lag (quarter-hours, ±MAX_LAG_QUARTERS) by which the reference must move
    later to match the production best, and the correlation there. Every lag at once: the
    reference's windows are a strided view (rows × lags × 100), no copy per lag."""
    lags = np.arange(-MAX_LAG_QUARTERS, MAX_LAG_QUARTERS + 1)
    # windows[:, j] starts at column j; the reference moved `lag` quarter-hours later
    # (production at t matches it at t − lag) starts at MAX_LAG_QUARTERS − lag.
    windows = np.lib.stride_tricks.sliding_window_view(expected, 100, axis=1)[:, ::-1]
    correlations = _row_correlation(actual, windows)
    best = np.argmax(correlations, axis=1)
    return lags[best], correlations[np.arange(len(actual)), best]


def _row_correlation(a: FloatArray, b: FloatArray) -> FloatArray:
    """Pearson's correlation of each row of `a` (rows × n) with each of its windows in `b`
    (rows × lags × n); −inf where undefined (a flat row)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a0 = a - a.mean(axis=1, keepdims=True)
        b0 = b - b.mean(axis=2, keepdims=True)
        covariance = np.einsum("rn,rkn->rk", a0, b0)
        result: FloatArray = covariance / np.sqrt(
            (a0 * a0).sum(axis=1)[:, None] * np.einsum("rkn,rkn->rk", b0, b0)
        )
    return np.nan_to_num(result, nan=-np.inf)
