"""The sun and the clear sky at a site, for the alert rules: solar position (pvlib's
`ephemeris`, within 0.01° of SPA and several times faster) and the AC energy a system would
make under a clear sky (Ineichen clear sky with the Linke turbidity climatology, Hay–Davies
transposition, PVWatts DC with its standard losses and the inverter limit).

All arrays are per quarter-hour, sampled at its midpoint.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solarapi.config import Settings

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

QUARTER_S = 900
DAY_QUARTERS = 86400 // QUARTER_S
# Site-days the process keeps of the sun and the clear sky (SkyCache) unless
# `SOLARAPI_ALERT_SKY_CACHE_DAYS` says otherwise: ~2.5 KB each with their bookkeeping, so
# ~41 MiB; an evaluation reads 38 or 39 of them (its 38-day window's UTC days), so the cache holds
# the windows of ~420 systems.
SKY_CACHE_DAYS: int = Settings.model_fields["alert_sky_cache_days"].default
# PVWatts' default system losses (soiling, mismatch, wiring, connections, LID, nameplate, no
# shading or availability loss), the same as the sandbox model's.
LOSSES = 0.1408
GAMMA_PDC = -0.0037
INVERTER_EFFICIENCY = 0.96
# An assumed cell temperature under a clear sky: the ratio to the clear-sky envelope is
# compared with the system's own history, so only its change within a few weeks matters.
CLEAR_SKY_CELL_C = 40.0


@dataclass(frozen=True, slots=True)
class Site:
    """What the rules need to know of a system."""

    latitude: float
    longitude: float
    tilt_deg: float
    azimuth_deg: float
    capacity_kwp: float
    inverter_capacity_kw: float | None


@dataclass(frozen=True, slots=True)
class SunGrid:
    """What the rules read of the sun at the midpoints of the quarter-hours starting at
    `starts` (epoch seconds)."""

    starts: IntArray
    elevation_deg: FloatArray
    # Angle of incidence on the panel plane: below 90° the sun is in front of the panel.
    aoi_deg: FloatArray


@dataclass(frozen=True, slots=True)
class Sun(SunGrid):
    """The sun at the midpoints of the quarter-hours starting at `starts` (epoch seconds),
    with what the clear-sky model needs besides."""

    zenith_deg: FloatArray
    apparent_zenith_deg: FloatArray
    azimuth_deg: FloatArray


def sun_at(site: Site, starts: IntArray) -> Sun:
    # Function-level: pandas and pvlib are ~2.5 s of import that start-up, the API's request
    # paths and the CLI never need (only the alert jobs run this).
    import pandas as pd
    import pvlib

    # The same index as pd.to_datetime(..., unit="s", utc=True), built without its parsing.
    midpoints = ((starts + QUARTER_S // 2) * 1_000_000_000).astype("datetime64[ns]")
    times = pd.DatetimeIndex(midpoints).tz_localize("UTC")
    position = pvlib.solarposition.ephemeris(times, site.latitude, site.longitude)
    zenith = position["zenith"].to_numpy(dtype=np.float64)
    azimuth = position["azimuth"].to_numpy(dtype=np.float64)
    aoi = np.asarray(
        pvlib.irradiance.aoi(site.tilt_deg, site.azimuth_deg, zenith, azimuth), dtype=np.float64
    )
    return Sun(
        starts=starts,
        elevation_deg=position["elevation"].to_numpy(dtype=np.float64),
        aoi_deg=aoi,
        zenith_deg=zenith,
        apparent_zenith_deg=position["apparent_zenith"].to_numpy(dtype=np.float64),
        azimuth_deg=azimuth,
    )


def clear_sky_energy_wh(site: Site, sun: Sun) -> FloatArray:
    """AC energy (Wh) of each quarter-hour under a clear sky; 0 with the sun down."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _clear_sky_energy_wh(site, sun)


def _clear_sky_energy_wh(site: Site, sun: Sun) -> FloatArray:
    # Function-level: pandas and pvlib are ~2.5 s of import that start-up, the API's request
    # paths and the CLI never need (only the alert jobs run this).
    import pvlib

    day_of_year = _day_of_year(sun.starts)
    dni_extra = np.asarray(pvlib.irradiance.get_extra_radiation(day_of_year), dtype=np.float64)
    airmass = pvlib.atmosphere.get_relative_airmass(sun.apparent_zenith_deg)
    absolute = pvlib.atmosphere.get_absolute_airmass(airmass)
    turbidity = _linke_turbidity(round(site.latitude, 1), round(site.longitude, 1))[day_of_year - 1]
    clear = pvlib.clearsky.ineichen(
        sun.apparent_zenith_deg, absolute, turbidity, dni_extra=dni_extra
    )
    poa = pvlib.irradiance.get_total_irradiance(
        site.tilt_deg,
        site.azimuth_deg,
        sun.apparent_zenith_deg,
        sun.azimuth_deg,
        _clean(clear["dni"]),
        _clean(clear["ghi"]),
        _clean(clear["dhi"]),
        dni_extra=dni_extra,
        airmass=airmass,
        model="haydavies",
    )
    poa_global = _clean(poa["poa_global"])
    dc_w = (
        site.capacity_kwp * poa_global * (1 + GAMMA_PDC * (CLEAR_SKY_CELL_C - 25.0)) * (1 - LOSSES)
    )
    ac_w = dc_w * INVERTER_EFFICIENCY
    if site.inverter_capacity_kw is not None:
        ac_w = np.minimum(ac_w, site.inverter_capacity_kw * 1000.0)
    energy: FloatArray = np.where(sun.elevation_deg > 0, ac_w, 0.0) * (QUARTER_S / 3600)
    return energy


class SkyCache:
    """The sun's elevation and angle of incidence and the clear-sky energy of a site, per
    UTC day, for the alert rules' 38-day window: an evaluation after an upload computes only
    the days it has not met (the first evaluation of a system in the process computes its
    whole window; after that, one new day a day), where it computed the whole window every
    time.

    Keyed by the whole `Site` (position, orientation, capacity and inverter limit: every
    input of the values) and the UTC day, so a hit returns what a computation would. The one
    difference: pvlib's `ephemeris` iterates Kepler's equation until every time of one call
    has converged (to 1e-4°), so a day computed with other days than the window's own differs
    from the window's computation in the last digits (measured: under 2e-6° of elevation);
    the findings and their (rounded) evidence are the same (tests/alerts/test_sky_cache.py).
    Bounded: at most `max_days` site-days (least recently used first out). Readings are not
    part of it: a correction to old readings is judged as before."""

    def __init__(self, max_days: int = SKY_CACHE_DAYS) -> None:
        self.max_days = max_days
        self._days: OrderedDict[tuple[Site, int], FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._days)

    def resize(self, max_days: int) -> None:
        """Keep at most `max_days` site-days from now on (the least recently used go first
        when it shrinks; 0: keep none)."""
        with self._lock:
            self.max_days = max_days
            while len(self._days) > max_days:
                self._days.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._days.clear()

    def window(self, site: Site, starts: IntArray) -> tuple[SunGrid, FloatArray]:
        """The sun and the clear-sky energy (Wh) at `starts`, a run of consecutive
        quarter-hour starts (as `detectors.grid` makes)."""
        if starts.size == 0:
            empty = np.empty(0, dtype=np.float64)
            return SunGrid(starts, empty, empty), empty
        first_day = int(starts[0]) // 86400
        days = range(first_day, int(starts[-1]) // 86400 + 1)
        with self._lock:
            found = {day: self._days.get((site, day)) for day in days}
        blocks = {day: block for day, block in found.items() if block is not None}
        missing = [day for day in days if day not in blocks]
        if missing:
            # One computation for every missing day (pvlib's calls cost ~1 ms each besides
            # their arithmetic).
            blocks.update(zip(missing, _compute_days(site, missing), strict=True))
        with self._lock:
            for day, block in blocks.items():
                key = (site, day)
                if key in self._days:
                    self._days.move_to_end(key)
                else:
                    self._days[key] = block
            while len(self._days) > self.max_days:
                self._days.popitem(last=False)
        values = np.concatenate([blocks[day] for day in days], axis=1)
        offset = (int(starts[0]) - first_day * 86400) // QUARTER_S
        chosen = values[:, offset : offset + starts.size]
        return SunGrid(starts, chosen[0], chosen[1]), chosen[2]


# The process's cache: every evaluation of the alert jobs reads through it, sized by
# `SOLARAPI_ALERT_SKY_CACHE_DAYS` (the job handlers apply it, `alerts.jobs`).
PROCESS_SKY = SkyCache()


def _compute_days(site: Site, days: list[int]) -> list[FloatArray]:
    """Per UTC day, a (3, 96) block: elevation, angle of incidence, clear-sky energy."""
    starts = (
        np.asarray(days, dtype=np.int64)[:, None] * 86400
        + np.arange(0, 86400, QUARTER_S, dtype=np.int64)[None, :]
    ).ravel()
    sun = sun_at(site, starts)
    # The clear sky only where the sun is up (it is 0 elsewhere): every step is per element,
    # so the values are those of the whole computation (tests/alerts/test_sky_cache.py).
    up = sun.elevation_deg > 0
    clear_wh = np.zeros(starts.size)
    clear_wh[up] = clear_sky_energy_wh(
        site,
        Sun(
            starts[up],
            sun.elevation_deg[up],
            sun.aoi_deg[up],
            sun.zenith_deg[up],
            sun.apparent_zenith_deg[up],
            sun.azimuth_deg[up],
        ),
    )
    stacked = np.stack([sun.elevation_deg, sun.aoi_deg, clear_wh])
    return [
        np.ascontiguousarray(stacked[:, k * DAY_QUARTERS : (k + 1) * DAY_QUARTERS])
        for k in range(len(days))
    ]


def _day_of_year(starts: IntArray) -> IntArray:
    """The UTC day of the year (1-366) of each epoch second."""
    days = starts.astype("datetime64[s]").astype("datetime64[D]")
    day_of_year: IntArray = (days - days.astype("datetime64[Y]")).astype(np.int64) + 1
    return day_of_year


def _clean(values: object) -> FloatArray:
    return np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)


@functools.lru_cache(maxsize=4096)
def _linke_turbidity(latitude: float, longitude: float) -> FloatArray:
    """The Linke turbidity per day of the year at a grid cell (pvlib's monthly climatology),
    read once per cell (~3 KB each, at most ~12 MB)."""
    # Function-level: pandas and pvlib are ~2.5 s of import that start-up, the API's request
    # paths and the CLI never need (only the alert jobs run this).
    import pandas as pd
    import pvlib

    times = pd.date_range("2023-01-01", periods=366, freq="D", tz="UTC")
    values = pvlib.clearsky.lookup_linke_turbidity(times, latitude, longitude)
    return np.asarray(values, dtype=np.float64)
