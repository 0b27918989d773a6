"""The physical model behind simulated systems: 15-minute AC energy from pvlib and synthetic weather.

Chain, per sample, all pvlib except the weather:
1. solar position — pvlib's `ephemeris` method: within 0.01° of NREL SPA over a year at our
   sites and ten times faster (SPA was 80 % of a cold simulation);
2. Ineichen clear-sky GHI with pvlib's monthly Linke turbidity climatology and site altitude;
3. × the clear-sky index of the synthetic weather (`weather.py`), then Erbs splits the cloudy
   GHI into beam and diffuse — so an overcast winter day loses a south roof's beam gain;
4. Hay–Davies transposition to the system's tilt and azimuth, ASHRAE incidence-angle loss on
   the beam;
5. SAPM cell temperature from the synthetic air temperature;
6. PVWatts DC with its standard losses (unshaded, always available), then the PVWatts
   inverter, which clips at `inverter_capacity_kw`.

Sampling: each quarter-hour is sampled at the midpoints of its three 5-minute thirds and its
energy is the mean of those AC powers × 0.25 h. One midpoint sample per quarter-hour would be
a third of the work but gets two things visibly wrong: the quarter-hour in which the sun rises
or sets (all or nothing instead of a ramp), and clipping, which is non-linear — the mean of
clipped powers is less than the clipped mean when clouds pass. `power_w` is that same mean AC
power, so `energy_wh = power_w × 0.25 h` holds exactly for every simulated reading.

Results are cached per system parameters and UTC month in a bounded LRU (`cache.py`): a cold
month costs tens of milliseconds, a warm one a slice.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pandas as pd
import pvlib

from solarapi.kit.grid import QUARTER_S, EnergySeries
from solarapi.models.systems import ReadableSystem
from solarapi.sandbox.cache import BoundedCache
from solarapi.sandbox.climate import reference_site
from solarapi.sandbox.utc_months import SIMULATION_START_S as SIMULATION_START_S  # re-exported
from solarapi.sandbox.utc_months import gather_months, grid_range, utc_months
from solarapi.sandbox.weather import (
    TYPICAL_WEIGHTS,
    air_temperature,
    mean_clear_sky_index,
    median_for_mean,
    typical_index_nodes,
    weather_at,
)

# Offsets of the three samples inside a quarter-hour: midpoints of its 5-minute thirds.
SAMPLE_OFFSETS_S = np.array([150, 450, 750], dtype=np.int64)
# The API serves simulated readings from SIMULATION_START_S on (see utc_months.py);
# `simulate` itself takes any range.
# A month of one system is ~24 KB; 960 months is 80 system-years in ~23 MB per process.
MAX_CACHED_MONTHS = 960
# Systems at or above this size are taken to be open-rack (ground parks, racked flat roofs);
# smaller ones flush roof mounts, which run hotter. The API has no mounting field.
OPEN_RACK_FROM_KWP = 100.0
# pvlib's PVWatts loss model with its defaults, except shading and availability (a sandbox
# system is unshaded and never down): soiling, mismatch, wiring, connections, LID, nameplate.
SYSTEM_LOSSES_PCT = float(
    pvlib.pvsystem.pvwatts_losses(
        soiling=2,
        shading=0,
        snow=0,
        mismatch=2,
        wiring=2,
        connections=0.5,
        lid=1.5,
        nameplate_rating=1,
        age=0,
        availability=0,
    )
)
GAMMA_PDC = -0.0037  # PVWatts' default power temperature coefficient (standard modules), 1/°C
INVERTER_EFFICIENCY = 0.96  # PVWatts' nominal inverter efficiency
WIND_SPEED_MS = 2.0
# The lowest clearness index (GHI ÷ extraterrestrial horizontal) of a daylight sky: thick
# overcast. Measured 15-minute clearness indices in Europe rarely fall below 0.05–0.08.
OVERCAST_CLEARNESS = 0.06
ALBEDO = 0.2

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PvParams:
    system_id: str
    latitude: float
    longitude: float
    timezone: str
    capacity_kwp: float
    inverter_capacity_kw: float | None
    tilt_deg: float
    azimuth_deg: float

    @classmethod
    def of(cls, system: ReadableSystem) -> PvParams:
        return cls(
            system_id=system.id,
            latitude=system.latitude,
            longitude=system.longitude,
            timezone=system.timezone,
            capacity_kwp=system.capacity_kwp,
            inverter_capacity_kw=system.inverter_capacity_kw,
            tilt_deg=system.tilt_deg,
            azimuth_deg=system.azimuth_deg,
        )


@dataclass(frozen=True, slots=True)
class SimulatedConditions:
    """What the simulation saw, per quarter-hour starting at `starts`: the mean plane-of-array
    irradiance and air temperature behind its readings. The performance model reads these as
    the simulated system's `sensor` irradiance, so a simulated PR is the simulation's own."""

    starts: IntArray
    poa_w_m2: FloatArray
    temp_air_c: FloatArray


@dataclass(frozen=True, slots=True)
class _Month:
    """One cached UTC month of one system: per quarter-hour AC energy, mean POA irradiance and
    mean air temperature (read-only arrays, shared by every caller)."""

    energy_wh: FloatArray
    poa_w_m2: FloatArray
    temp_air_c: FloatArray


_months: BoundedCache[tuple[PvParams, int, int], _Month] = BoundedCache(MAX_CACHED_MONTHS)


def simulate(params: PvParams, start: datetime, end: datetime) -> EnergySeries:
    """Simulated readings for every quarter-hour in [start, end); pure and deterministic.

    `start` and `end` are aware datetimes on the 15-minute grid. Night quarter-hours are 0.0.
    The caller clips `end` to the last whole quarter-hour before now.
    """
    start_s, end_s = grid_range(start, end)
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    if starts.size == 0:
        empty = np.zeros(0, dtype=np.float64)
        return EnergySeries(starts, empty, np.zeros(0, dtype=np.int64), empty.copy())

    energy_wh = gather_months(
        start_s, end_s, lambda year, month, lo, hi: _month(params, year, month, lo, hi).energy_wh
    )
    # Every quarter-hour is a sample; its power is the quarter-hour's mean.
    samples = np.ones(len(starts), dtype=np.int64)
    return EnergySeries(starts, energy_wh, samples, energy_wh * (3600 / QUARTER_S))


def simulated_conditions(params: PvParams, start: datetime, end: datetime) -> SimulatedConditions:
    """The irradiance and air temperature behind `simulate(params, start, end)`, from the same
    cached months (so asking for both models each month once)."""
    start_s, end_s = grid_range(start, end)
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    poa = gather_months(
        start_s, end_s, lambda year, month, lo, hi: _month(params, year, month, lo, hi).poa_w_m2
    )
    temp = gather_months(
        start_s, end_s, lambda year, month, lo, hi: _month(params, year, month, lo, hi).temp_air_c
    )
    return SimulatedConditions(starts, poa, temp)


def is_cached(params: PvParams, start: datetime, end: datetime) -> bool:
    """Whether `simulate(params, start, end)` would be served from the cache alone (callers use
    it to skip a thread hop when there is no work to move off the event loop)."""
    start_s, end_s = grid_range(start, end)
    return all(
        _months.peek((params, year, month)) for _, _, year, month in utc_months(start_s, end_s)
    )


def clear_cache() -> None:
    """Forget every cached month (benchmarks use it to measure cold runs)."""
    _months.clear()


def _month(params: PvParams, year: int, month: int, month_start_s: int, month_end_s: int) -> _Month:
    key = (params, year, month)
    cached = _months.get(key)
    if cached is not None:
        return cached
    starts = np.arange(month_start_s, month_end_s, QUARTER_S, dtype=np.int64)
    computed = _quarter_hours(params, starts)
    for values in (computed.energy_wh, computed.poa_w_m2, computed.temp_air_c):
        values.flags.writeable = False  # shared by every caller through the cache
    _months.put(key, computed)
    return computed


def quarter_hour_energy(params: PvParams, starts: IntArray) -> FloatArray:
    """AC energy (Wh) of each quarter-hour starting at `starts` (epoch seconds), uncached."""
    return _quarter_hours(params, starts).energy_wh


def _quarter_hours(params: PvParams, starts: IntArray) -> _Month:
    samples = (starts[:, None] + SAMPLE_OFFSETS_S[None, :]).ravel()
    state = _samples(params, samples)

    def mean(values: FloatArray) -> FloatArray:
        result: FloatArray = values.reshape(-1, SAMPLE_OFFSETS_S.size).mean(axis=1)
        return result

    return _Month(
        energy_wh=mean(state.ac_w) * (QUARTER_S / 3600),
        poa_w_m2=mean(state.poa_w_m2),
        temp_air_c=mean(state.temp_air_c),
    )


def ac_power(params: PvParams, utc_seconds: IntArray) -> FloatArray:
    """Instantaneous AC power (W) at each sample time, weather included."""
    return _samples(params, utc_seconds).ac_w


@dataclass(frozen=True, slots=True)
class _SampleState:
    ac_w: FloatArray
    poa_w_m2: FloatArray
    temp_air_c: FloatArray


def _samples(params: PvParams, utc_seconds: IntArray) -> _SampleState:
    # pvlib divides by cos(zenith) and the like below the horizon; those samples are cleaned
    # to 0 W afterwards, so the warnings are noise (and the test suite turns warnings to errors).
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _ac_power(params, utc_seconds)


def _ac_power(params: PvParams, utc_seconds: IntArray) -> _SampleState:
    times = pd.DatetimeIndex(pd.to_datetime(utc_seconds, unit="s", utc=True)).as_unit("ns")
    local_seconds = (
        times.tz_convert(params.timezone).tz_localize(None).as_unit("s").asi8.astype(np.int64)
    )
    altitude = _altitude(params.latitude, params.longitude)

    solar = pvlib.solarposition.get_solarposition(
        times, params.latitude, params.longitude, altitude=altitude, method="ephemeris"
    )
    apparent_zenith = solar["apparent_zenith"].to_numpy()
    zenith = solar["zenith"].to_numpy()
    solar_azimuth = solar["azimuth"].to_numpy()
    airmass_relative = pvlib.atmosphere.get_relative_airmass(apparent_zenith)
    airmass_absolute = pvlib.atmosphere.get_absolute_airmass(
        airmass_relative, pvlib.atmosphere.alt2pres(altitude)
    )
    day_of_year = times.day_of_year.to_numpy()
    dni_extra = np.asarray(pvlib.irradiance.get_extra_radiation(day_of_year), dtype=np.float64)
    turbidity = _linke_turbidity(params.latitude, params.longitude)[day_of_year - 1]
    weather = weather_at(
        params.system_id,
        params.latitude,
        params.longitude,
        utc_seconds,
        local_seconds,
        _climatology(params.latitude, params.longitude),
    )
    clear = pvlib.clearsky.ineichen(
        apparent_zenith, airmass_absolute, turbidity, altitude=altitude, dni_extra=dni_extra
    )
    # Clouds act on global horizontal irradiance; Erbs then splits the cloudy GHI into beam and
    # diffuse. Scaling the tilted irradiance directly would keep a clear day's beam gain on
    # overcast winter days, when a south roof really sees little more than the horizontal.
    # Overcast still lets diffuse light through: the clearness index (GHI ÷ extraterrestrial
    # horizontal irradiance) of the darkest daylight sky stays above ~0.06. Near sunrise and
    # sunset the clear-sky GHI itself is small, so a floor relative to it alone would leave a
    # few W/m², below what an inverter needs to run, with the sun well above the panel.
    horizontal_extra = dni_extra * np.clip(np.cos(np.radians(zenith)), 0.0, None)
    ghi = np.maximum(
        _clean(clear["ghi"]) * weather.clear_sky_index, OVERCAST_CLEARNESS * horizontal_extra
    )
    split = pvlib.irradiance.erbs(ghi, zenith, day_of_year)
    poa = pvlib.irradiance.get_total_irradiance(
        params.tilt_deg,
        params.azimuth_deg,
        apparent_zenith,
        solar_azimuth,
        _clean(split["dni"]),
        ghi,
        _clean(split["dhi"]),
        dni_extra=dni_extra,
        airmass=airmass_relative,
        albedo=ALBEDO,
        model="haydavies",
    )
    aoi = pvlib.irradiance.aoi(params.tilt_deg, params.azimuth_deg, zenith, solar_azimuth)
    beam_iam = pvlib.iam.ashrae(aoi)
    effective = _clean(poa["poa_direct"]) * _clean(beam_iam) + _clean(poa["poa_diffuse"])
    poa_global = _clean(poa["poa_global"])

    mount = (
        "open_rack_glass_glass"
        if params.capacity_kwp >= OPEN_RACK_FROM_KWP
        else "close_mount_glass_glass"
    )
    temperature_params = pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"][mount]
    temp_cell = pvlib.temperature.sapm_cell(
        poa_global, weather.temp_air_c, WIND_SPEED_MS, **temperature_params
    )
    dc = pvlib.pvsystem.pvwatts_dc(
        effective, temp_cell, params.capacity_kwp * 1000.0, GAMMA_PDC
    ) * (1 - SYSTEM_LOSSES_PCT / 100)
    dc = np.maximum(_clean(dc), 0.0)
    if params.inverter_capacity_kw is None:
        # No inverter limit: PVWatts' efficiency curve for an inverter matched to the array,
        # without its clipping — above its rating the curve is flat at η_nom, so that is used.
        dc_rating_w = params.capacity_kwp * 1000.0
        ac = _clean(pvlib.inverter.pvwatts(dc, dc_rating_w, INVERTER_EFFICIENCY))
        ac = np.where(dc >= dc_rating_w, dc * INVERTER_EFFICIENCY, ac)
    else:
        # PVWatts rates the inverter by its DC input: AC limit = η_nom × pdc0.
        dc_rating_w = params.inverter_capacity_kw * 1000.0 / INVERTER_EFFICIENCY
        ac = _clean(pvlib.inverter.pvwatts(dc, dc_rating_w, INVERTER_EFFICIENCY))
    return _SampleState(np.maximum(ac, 0.0), poa_global, np.asarray(weather.temp_air_c))


def _clean(values: object) -> FloatArray:
    """pvlib answers NaN below the horizon in some steps; the sun is simply not there: 0 W."""
    return np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)


@functools.lru_cache(maxsize=512)
def _altitude(latitude: float, longitude: float) -> float:
    # pvlib ships a global elevation grid; below sea level (polders) counts as sea level.
    return max(0.0, float(pvlib.location.lookup_altitude(latitude, longitude)))


@functools.lru_cache(maxsize=512)
def _linke_turbidity(latitude: float, longitude: float) -> FloatArray:
    """The site's Linke turbidity for each day of the year (366 values), from pvlib's climatology."""
    days = pd.date_range("2024-01-01 12:00", periods=366, freq="D", tz="UTC")
    with warnings.catch_warnings():
        # pvlib 0.16 reads DatetimeIndex.dayofyear, which pandas 3 deprecates; harmless here.
        warnings.simplefilter("ignore", DeprecationWarning)
        values = pvlib.clearsky.lookup_linke_turbidity(
            days, latitude, longitude, interp_turbidity=True
        )
    result = np.asarray(values, dtype=np.float64)
    result.flags.writeable = False
    return result


# Mid-month days of the year: where each month's normal sits on the daily climatology.
_MID_MONTH_DAY = np.array([16, 45.5, 75, 105.5, 136, 166.5, 197, 228, 258.5, 289, 319.5, 350])
_CLIMATE_YEAR = 2023  # any common year: only the month lengths and the sun's path matter


@functools.lru_cache(maxsize=512)
def _climatology(latitude: float, longitude: float) -> FloatArray | None:
    """The median of the daily clear-sky index for each day of the year (366 values) that
    reproduces the nearest reference site's monthly climate normals, or None (no site near):
    the logit-normal median of `_site_mean_by_day`."""
    mean = _site_mean_by_day(latitude, longitude)
    if mean is None:
        return None
    median = median_for_mean(mean)
    median.flags.writeable = False
    return median


@functools.lru_cache(maxsize=512)
def _site_mean_by_day(latitude: float, longitude: float) -> FloatArray | None:
    """The mean daily clear-sky index for each day of the year (366 values) that reproduces
    the nearest reference site's monthly climate normals, or None (no site near).

    Per month: target mean index = the normal's mean daily irradiation ÷ this model's own
    clear-sky irradiation at the place (Ineichen, Linke turbidity, altitude: the chain above);
    interpolated between mid-months.
    """
    site = reference_site(latitude, longitude)
    if site is None:
        return None
    # Night hours divide by cos(zenith) inside pvlib; they are cleaned to 0 W (see ac_power).
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _site_index_by_day(latitude, longitude, site.ghi_kwh_m2_day)


def _site_index_by_day(
    latitude: float, longitude: float, normal_kwh_m2_day: tuple[float, ...]
) -> FloatArray:
    times = pd.date_range(
        f"{_CLIMATE_YEAR}-01-01 00:30", f"{_CLIMATE_YEAR}-12-31 23:30", freq="1h", tz="UTC"
    )
    altitude = _altitude(latitude, longitude)
    solar = pvlib.solarposition.get_solarposition(
        times, latitude, longitude, altitude=altitude, method="ephemeris"
    )
    apparent_zenith = solar["apparent_zenith"].to_numpy()
    airmass = pvlib.atmosphere.get_absolute_airmass(
        pvlib.atmosphere.get_relative_airmass(apparent_zenith), pvlib.atmosphere.alt2pres(altitude)
    )
    day_of_year = times.day_of_year.to_numpy()
    clear = pvlib.clearsky.ineichen(
        apparent_zenith,
        airmass,
        _linke_turbidity(latitude, longitude)[day_of_year - 1],
        altitude=altitude,
        dni_extra=np.asarray(pvlib.irradiance.get_extra_radiation(day_of_year), dtype=np.float64),
    )
    hourly_kwh = _clean(clear["ghi"]) / 1000.0
    months = times.month.to_numpy()
    days_in_month = np.bincount(months, minlength=13)[1:] / 24
    clear_daily = np.bincount(months, weights=hourly_kwh, minlength=13)[1:] / days_in_month
    target = np.asarray(normal_kwh_m2_day, dtype=np.float64) / clear_daily
    by_day: FloatArray = np.interp(np.arange(1, 367), _MID_MONTH_DAY, target, period=365.25)
    by_day.flags.writeable = False
    return by_day


# --- the typical year and the clear sky, for the performance model ------------------------------


@dataclass(frozen=True, slots=True)
class Sky:
    """The sky over a site at given instants, as the sandbox's model sees it: the sun's
    position (degrees), the extraterrestrial normal irradiance and relative airmass (what
    Hay–Davies needs), the Ineichen clear sky, and the site's typical-year sky with its
    typical air temperature. `climate` names the reference site whose normals the typical
    year follows (None: the coarse latitude climatology).

    The typical sky is the sandbox's weather in expectation, as quadrature points: row j of
    `typical_ghi`/`typical_dni`/`typical_dhi` (shape points × instants) is the clear sky ×
    the j-th point of the instantaneous clear-sky index's distribution
    (`weather.typical_index_nodes`: the day's index around the climatological median plus
    passing clouds), split by Erbs; a quantity's typical value is `typical_weights @` its
    value per row (the performance model so averages the transposed irradiance)."""

    zenith: FloatArray
    apparent_zenith: FloatArray
    azimuth: FloatArray
    dni_extra: FloatArray
    airmass_relative: FloatArray
    clear_ghi: FloatArray
    clear_dni: FloatArray
    clear_dhi: FloatArray
    typical_ghi: FloatArray
    typical_dni: FloatArray
    typical_dhi: FloatArray
    typical_weights: FloatArray
    typical_temp_air_c: FloatArray
    climate: str | None


def sky(latitude: float, longitude: float, utc_seconds: IntArray) -> Sky:
    """The `Sky` at each instant (epoch seconds): the same solar position, clear-sky model and
    climate normals that drive the simulated systems (one source of truth for both)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _sky(latitude, longitude, utc_seconds)


def _sky(latitude: float, longitude: float, utc_seconds: IntArray) -> Sky:
    times = pd.DatetimeIndex(pd.to_datetime(utc_seconds, unit="s", utc=True)).as_unit("ns")
    altitude = _altitude(latitude, longitude)
    solar = pvlib.solarposition.get_solarposition(
        times, latitude, longitude, altitude=altitude, method="ephemeris"
    )
    apparent_zenith = solar["apparent_zenith"].to_numpy()
    zenith = solar["zenith"].to_numpy()
    airmass_relative = pvlib.atmosphere.get_relative_airmass(apparent_zenith)
    airmass_absolute = pvlib.atmosphere.get_absolute_airmass(
        airmass_relative, pvlib.atmosphere.alt2pres(altitude)
    )
    day_of_year = times.day_of_year.to_numpy()
    dni_extra = np.asarray(pvlib.irradiance.get_extra_radiation(day_of_year), dtype=np.float64)
    clear = pvlib.clearsky.ineichen(
        apparent_zenith,
        airmass_absolute,
        _linke_turbidity(latitude, longitude)[day_of_year - 1],
        altitude=altitude,
        dni_extra=dni_extra,
    )
    clear_ghi = _clean(clear["ghi"])
    site_mean = _site_mean_by_day(latitude, longitude)
    latitude_index = mean_clear_sky_index(latitude, day_of_year.astype(np.int64))
    mean_index = latitude_index if site_mean is None else site_mean[day_of_year - 1]
    # The daily index's median as `weather_at` draws around it (the latitude climatology's
    # value is itself taken as the median there).
    site_median = _climatology(latitude, longitude)
    median = latitude_index if site_median is None else site_median[day_of_year - 1]
    # Daylight only (the quadrature multiplies the work ~64×; at night every point is 0).
    lit = clear_ghi > 0
    points = typical_index_nodes(median[lit])
    count = len(points)
    horizontal_extra = dni_extra * np.clip(np.cos(np.radians(zenith)), 0.0, None)
    lit_ghi = np.maximum(clear_ghi[lit] * points, OVERCAST_CLEARNESS * horizontal_extra[lit])
    split = pvlib.irradiance.erbs(
        lit_ghi.ravel(), np.tile(zenith[lit], count), np.tile(day_of_year[lit], count)
    )
    typical_ghi, typical_dni, typical_dhi = (np.zeros((count, len(zenith))) for _ in range(3))
    typical_ghi[:, lit] = lit_ghi
    typical_dni[:, lit] = _clean(split["dni"]).reshape(lit_ghi.shape)
    typical_dhi[:, lit] = _clean(split["dhi"]).reshape(lit_ghi.shape)
    site = reference_site(latitude, longitude)
    return Sky(
        zenith=zenith,
        apparent_zenith=apparent_zenith,
        azimuth=solar["azimuth"].to_numpy(),
        dni_extra=dni_extra,
        airmass_relative=_clean(airmass_relative),
        clear_ghi=clear_ghi,
        clear_dni=_clean(clear["dni"]),
        clear_dhi=_clean(clear["dhi"]),
        typical_ghi=typical_ghi,
        typical_dni=typical_dni,
        typical_dhi=typical_dhi,
        typical_weights=TYPICAL_WEIGHTS,
        typical_temp_air_c=air_temperature(
            latitude, longitude, utc_seconds, day_of_year.astype(np.int64), mean_index, 0.0
        ),
        climate=None if site is None else site.name,
    )
