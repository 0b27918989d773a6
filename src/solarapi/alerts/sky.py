"""The sun and the clear sky at a site, for the alert rules: solar position (pvlib's
`ephemeris`, within 0.01° of SPA and several times faster) and the AC energy a system would
make under a clear sky (Ineichen clear sky with the Linke turbidity climatology, Hay–Davies
transposition, PVWatts DC with its standard losses and the inverter limit).

All arrays are per quarter-hour, sampled at its midpoint.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pvlib

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

QUARTER_S = 900
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
class Sun:
    """The sun at the midpoints of the quarter-hours starting at `starts` (epoch seconds)."""

    starts: IntArray
    elevation_deg: FloatArray
    # Angle of incidence on the panel plane: below 90° the sun is in front of the panel.
    aoi_deg: FloatArray
    zenith_deg: FloatArray
    apparent_zenith_deg: FloatArray
    azimuth_deg: FloatArray


def sun_at(site: Site, starts: IntArray) -> Sun:
    times = pd.DatetimeIndex(pd.to_datetime(starts + QUARTER_S // 2, unit="s", utc=True))
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
    day_of_year = pd.DatetimeIndex(
        pd.to_datetime(sun.starts, unit="s", utc=True)
    ).day_of_year.to_numpy()
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


def _clean(values: object) -> FloatArray:
    return np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)


@functools.lru_cache(maxsize=4096)
def _linke_turbidity(latitude: float, longitude: float) -> FloatArray:
    """The Linke turbidity per day of the year at a grid cell (pvlib's monthly climatology),
    read once per cell (~3 KB each, at most ~12 MB)."""
    times = pd.date_range("2023-01-01", periods=366, freq="D", tz="UTC")
    values = pvlib.clearsky.lookup_linke_turbidity(times, latitude, longitude)
    return np.asarray(values, dtype=np.float64)
