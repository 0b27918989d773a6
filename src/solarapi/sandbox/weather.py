"""Deterministic synthetic weather for the sandbox: a clear-sky index and an air temperature.

Everything here is a pure function of (seed key, local date, time), so any range can be
computed on its own, in any process, and gives the same numbers. Randomness comes from
BLAKE2b of a text key — never Python's `hash()`, which is salted per process — fed to numpy's
PCG64 bit generator; normals are made from its uniforms with the Box–Muller transform, because
numpy documents the bit stream as stable but not its normal-distribution algorithms.

The climatology: near a reference site of `climate.py` the daily index's mean follows that
site's monthly climate normals (the caller passes it per day of the year, `median_by_day`);
elsewhere it is a coarse function of latitude and season (`mean_clear_sky_index`), there so
that summer beats winter by a plausible factor, not to forecast any real place.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import date

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Sub-daily resolution of the cloud process: five minutes, three samples per quarter-hour.
STEP_S = 300
# Steps of a local day, indexed by wall clock: on a DST fall-back day the repeated night hour
# simply repeats its (sunless) clouds.
STEPS_PER_DAY = 24 * 3600 // STEP_S
# Day-to-day persistence: the daily cloud anomaly is a moving average of this many days'
# innovations with geometric weights, i.e. a truncated AR(1) with lag-1 correlation 0.3
# (observed daily clearness indices in Europe correlate at about 0.3–0.5 from one day to the
# next). A moving average, unlike a true AR(1), needs no history before the requested range.
PERSISTENCE = 0.3
PERSISTENCE_DAYS = 8
_WEIGHTS = PERSISTENCE ** np.arange(PERSISTENCE_DAYS, dtype=np.float64)
_WEIGHTS /= math.sqrt(float(np.sum(_WEIGHTS**2)))
# Intra-day cloud structure: AR(1) on the 5-minute grid with a correlation time of ~30 min.
INTRADAY_PHI = math.exp(-STEP_S / 1800)
INTRADAY_TAPS = 48
_INTRADAY_WEIGHTS = INTRADAY_PHI ** np.arange(INTRADAY_TAPS, dtype=np.float64)
_INTRADAY_WEIGHTS /= math.sqrt(float(np.sum(_INTRADAY_WEIGHTS**2)))
# The daily clear-sky index lives in [LOW, HIGH]: an overcast day still lets through ~12 % of
# clear-sky irradiance; above 1.0 is the slight enhancement of a bright, haze-free day.
INDEX_LOW = 0.12
INDEX_HIGH = 1.02
# The instantaneous index (the day's index plus passing clouds) never drops below this: under
# the thickest overcast diffuse light still reaches the ground (measured 15-minute clear-sky
# indices rarely go below ~0.1 in daylight). A lower floor let a bright array produce exactly
# 0 Wh with the sun well up, which daylight never does. Cloud-edge enhancement caps it above.
INSTANT_LOW = 0.10
INSTANT_HIGH = 1.12
# Spread of the daily index on the logit scale (daily standard deviation ≈ 0.14 at a mean of
# 0.45). Wider gives a wilder climate, but also months so far from their mean that a Dutch
# June/December ratio leaves the plausible 4–10 band for some system ids; 0.6 keeps it within
# ~4.5–8.5 over hundreds of ids while grey and brilliant days both occur.
LOGIT_SPREAD = 0.6


def _uniforms(key: str, count: int) -> FloatArray:
    seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "big")
    generator = np.random.Generator(np.random.PCG64(seed))
    # random() maps 53 bits to [0, 1); keep away from 0 so the logarithm stays finite.
    values: FloatArray = np.clip(generator.random(count), 1e-300, 1.0)
    return values


def seeded_normals(key: str, count: int) -> FloatArray:
    """`count` independent standard normals (Box–Muller on seeded uniforms)."""
    pairs = (count + 1) // 2
    uniforms = _uniforms(key, 2 * pairs)
    radius = np.sqrt(-2.0 * np.log(uniforms[:pairs]))
    angle = 2.0 * np.pi * uniforms[pairs:]
    normals: FloatArray = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])
    return normals[:count]


def mean_clear_sky_index(latitude: float, day_of_year: IntArray) -> FloatArray:
    """Climatological mean of the daily clear-sky index (measured ÷ clear-sky irradiance).

    Roughly: ~0.7 in the subtropics, ~0.6 in north-western Europe, cloudier in winter at
    high latitudes; the seasonal swing grows with latitude and flips with the hemisphere.
    """
    lat = abs(latitude)
    annual = float(
        np.interp(lat, [0, 15, 30, 40, 50, 60, 90], [0.62, 0.7, 0.74, 0.7, 0.61, 0.54, 0.5])
    )
    swing = float(np.interp(lat, [0, 20, 35, 50, 90], [0.02, 0.03, 0.06, 0.08, 0.1]))
    # Cloudiest around the winter solstice of the hemisphere (day 355 north, day 172 south).
    winter_day = 355 if latitude >= 0 else 172
    phase = 2 * np.pi * (day_of_year.astype(np.float64) - winter_day) / 365.25
    result: FloatArray = annual - swing * np.cos(phase)
    return result


def _day_key(seed_key: str, day: int, kind: str) -> str:
    # The day as a proleptic ordinal written out, so the key does not depend on any epoch choice.
    return f"solarapi-sandbox|{kind}|{seed_key}|{day}"


def daily_anomaly(seed_key: str, days: IntArray) -> FloatArray:
    """Standard-normal daily weather anomaly with day-to-day persistence, per ordinal day."""
    first = int(days.min()) - (PERSISTENCE_DAYS - 1)
    last = int(days.max())
    innovations = np.array(
        [_day_normal(_day_key(seed_key, d, "day")) for d in range(first, last + 1)]
    )
    # anomaly[d] = Σ_k w_k · innovation[d - k]
    smoothed = np.convolve(innovations, _WEIGHTS, mode="valid")
    result: FloatArray = smoothed[days - (first + PERSISTENCE_DAYS - 1)]
    return result


def _day_normal(key: str) -> float:
    """One standard normal straight from a hash: far cheaper than seeding a generator."""
    digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
    # 53-bit uniforms in (0, 1], then Box–Muller.
    u1 = ((int.from_bytes(digest[:8], "big") >> 11) + 1) / 2.0**53
    u2 = (int.from_bytes(digest[8:], "big") >> 11) / 2.0**53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def daily_clear_sky_index(seed_key: str, median: FloatArray, days: IntArray) -> FloatArray:
    """The day's mean clear-sky index: the persistent anomaly on a logit-normal scale around
    the climatological `median` of each day.

    Logit-normal keeps the index inside [INDEX_LOW, INDEX_HIGH] with no clipping pile-up at
    the ends.
    """
    scaled = (median - INDEX_LOW) / (INDEX_HIGH - INDEX_LOW)
    logit = np.log(scaled / (1 - scaled)) + LOGIT_SPREAD * daily_anomaly(seed_key, days)
    result: FloatArray = INDEX_LOW + (INDEX_HIGH - INDEX_LOW) / (1 + np.exp(-logit))
    return result


# Probabilists' Gauss–Hermite nodes: E[f(Z)] for a standard normal Z as a weighted sum.
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
_LOGIT_GRID = np.linspace(-9.0, 9.0, 3601)
_MEAN_ON_GRID: FloatArray = (
    INDEX_LOW
    + (INDEX_HIGH - INDEX_LOW)
    * (1 / (1 + np.exp(-(_LOGIT_GRID[:, None] + LOGIT_SPREAD * _GH_NODES[None, :]))))
    @ _GH_WEIGHTS
)


def median_for_mean(mean: FloatArray) -> FloatArray:
    """The median of the daily index whose logit-normal distribution has mean `mean`.

    The logit-normal's mean is pulled towards the middle of [INDEX_LOW, INDEX_HIGH] compared
    with its median, so a climate normal (a mean) must be turned into the median the daily
    index is drawn around. Inverted on a precomputed grid (monotone, so interpolation is exact
    to ~1e-4)."""
    lo, hi = float(_MEAN_ON_GRID[0]), float(_MEAN_ON_GRID[-1])
    logit = np.interp(np.clip(mean, lo, hi), _MEAN_ON_GRID, _LOGIT_GRID)
    result: FloatArray = INDEX_LOW + (INDEX_HIGH - INDEX_LOW) / (1 + np.exp(-logit))
    return result


def intraday_noise(seed_key: str, day: int) -> FloatArray:
    """Unit-variance AR(1)-like cloud noise on the day's 5-minute wall-clock grid (288 steps).

    Written as a moving average of seeded innovations with weights φ^k over 4 hours (φ^48 ≈
    3e-4, so the truncation is invisible): vectorised, where an AR(1) recursion is a Python loop.
    """
    innovations = seeded_normals(
        _day_key(seed_key, day, "intraday"), STEPS_PER_DAY + INTRADAY_TAPS - 1
    )
    noise: FloatArray = np.convolve(innovations, _INTRADAY_WEIGHTS, mode="valid")
    return noise


def intraday_spread(day_index: FloatArray) -> FloatArray:
    """How far passing clouds move the instantaneous index around the day's (a multiple of
    the unit-variance `intraday_noise`): broken clouds vary most on middling days; clear and
    fully overcast days are steady."""
    unsettled = 4 * np.clip(day_index, 0, 1) * (1 - np.clip(day_index, 0, 1))
    spread: FloatArray = 0.05 + 0.35 * unsettled
    return spread


# The typical year (the performance model's `typical` sky, `sandbox.model.sky`) is the
# expectation over the weather `weather_at` draws from, by Gauss–Hermite quadrature: this many
# points for the day's index times this many for its passing clouds. Taking the sky of the
# day's mean index instead (one cloudiness all day, split into beam and diffuse as such) lost
# the beam that broken clouds let through onto a tilted panel: a Dutch 35° roof's expected
# winter energy came out 1.5× too low against the sandbox's own climate
# (tests/performance/test_typical_year.py).
TYPICAL_DAILY_NODES = 8
TYPICAL_INTRADAY_NODES = 8
_DAY_NODES, _DAY_WEIGHTS = np.polynomial.hermite_e.hermegauss(TYPICAL_DAILY_NODES)
_CLOUD_NODES, _CLOUD_WEIGHTS = np.polynomial.hermite_e.hermegauss(TYPICAL_INTRADAY_NODES)
TYPICAL_WEIGHTS: FloatArray = np.outer(_DAY_WEIGHTS, _CLOUD_WEIGHTS).ravel() / (
    _DAY_WEIGHTS.sum() * _CLOUD_WEIGHTS.sum()
)
TYPICAL_WEIGHTS.flags.writeable = False


def typical_index_nodes(median: FloatArray) -> FloatArray:
    """The quadrature points of the instantaneous clear-sky index at instants whose day has
    the climatological `median` (one value per instant): shape (points, instants), so that
    `TYPICAL_WEIGHTS @ f(points)` ≈ E[f(index)] for the index `weather_at` draws there — the
    day's logit-normal index (`daily_clear_sky_index`) plus its passing clouds
    (`intraday_spread` × a standard normal), clipped as there."""
    scaled = (median - INDEX_LOW) / (INDEX_HIGH - INDEX_LOW)
    logit = np.log(scaled / (1 - scaled))
    day = INDEX_LOW + (INDEX_HIGH - INDEX_LOW) / (
        1 + np.exp(-(logit[None, :] + LOGIT_SPREAD * _DAY_NODES[:, None]))
    )
    instant = day[:, None, :] + intraday_spread(day)[:, None, :] * _CLOUD_NODES[None, :, None]
    # The point count spelled out: with no instant at all (a UTC month of polar night has no
    # daylight) `-1` cannot be inferred from an empty array.
    points: FloatArray = np.clip(instant, INSTANT_LOW, INSTANT_HIGH).reshape(
        TYPICAL_DAILY_NODES * TYPICAL_INTRADAY_NODES, median.size
    )
    return points


@dataclass(frozen=True, slots=True)
class Weather:
    """Per sample: the clear-sky index (multiplies clear-sky irradiance) and the air temperature."""

    clear_sky_index: FloatArray
    temp_air_c: FloatArray


def weather_at(
    seed_key: str,
    latitude: float,
    longitude: float,
    utc_seconds: IntArray,
    local_seconds: IntArray,
    median_by_day: FloatArray | None = None,
) -> Weather:
    """Weather at sample times given in UTC and in local wall-clock epoch seconds.

    The weather day is the local calendar day, so a day's clouds do not jump at UTC midnight
    in the middle of an Australian morning. `median_by_day` (366 values, by day of the year)
    is the site's climatological median of the daily index; without it, the coarse latitude
    climatology is used.
    """
    local_day = local_seconds // 86400  # days since 1970-01-01 (local wall clock)
    step = (local_seconds - local_day * 86400) // STEP_S
    unique_days, inverse = np.unique(local_day, return_inverse=True)
    ordinal = unique_days + 719163  # date(1970, 1, 1).toordinal()
    day_of_year = np.array([_day_of_year(int(o)) for o in ordinal], dtype=np.int64)
    median = (
        mean_clear_sky_index(latitude, day_of_year)
        if median_by_day is None
        else median_by_day[day_of_year - 1]
    )
    day_index = daily_clear_sky_index(seed_key, median, ordinal)
    day_anomaly = daily_anomaly(seed_key, ordinal)

    spread = intraday_spread(day_index)
    noise = np.empty(local_seconds.shape, dtype=np.float64)
    for i, ordinal_day in enumerate(ordinal):
        mask = inverse == i
        noise[mask] = intraday_noise(seed_key, int(ordinal_day))[step[mask]]
    index = np.clip(day_index[inverse] + spread[inverse] * noise, INSTANT_LOW, INSTANT_HIGH)

    temp_air = air_temperature(
        latitude,
        longitude,
        utc_seconds,
        day_of_year[inverse],
        day_index[inverse],
        day_anomaly[inverse],
    )
    return Weather(clear_sky_index=index, temp_air_c=temp_air)


def air_temperature(
    latitude: float,
    longitude: float,
    utc_seconds: IntArray,
    day_of_year: IntArray,
    day_index: FloatArray,
    day_anomaly: FloatArray | float,
) -> FloatArray:
    """Air temperature (°C) per sample: latitude mean, seasonal swing, a diurnal cycle peaking
    at 15:00 solar time that is wider on clear days (`day_index`, the day's clear-sky index),
    and the day's anomaly (bright summer days are warmer). With the mean index and no anomaly
    it is the site's typical temperature, which the performance model's `typical` source uses."""
    lat = abs(latitude)
    annual_c = 30.0 - 0.38 * lat
    seasonal_c = max(1.0, 0.2 * lat - 2.0)
    warmest_day = 201 if latitude >= 0 else 19
    season = np.cos(2 * np.pi * (day_of_year - warmest_day) / 365.25)
    solar_hour = np.mod(utc_seconds / 3600.0 + longitude / 15.0, 24.0)
    diurnal = (1.5 + 4.5 * day_index) * np.cos(2 * np.pi * (solar_hour - 15.0) / 24.0)
    result: FloatArray = annual_c + seasonal_c * season + diurnal + 2.0 * np.asarray(day_anomaly)
    return result


def _day_of_year(ordinal: int) -> int:
    return date.fromordinal(ordinal).timetuple().tm_yday
