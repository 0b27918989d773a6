"""The expected-energy model: what a system should have produced, per quarter-hour, from the
irradiance it saw (pure functions of typed values; no database, no HTTP).

The chain, all pvlib (docs/performance.md has the formulas and how to recompute a number):
1. plane-of-array irradiance: `sensor` POA as measured; `satellite` GHI/DNI/DHI transposed
   with Hay–Davies (albedo 0.2); `typical` the site's typical-year sky from the sandbox's
   climate normals (`sandbox.model.sky`, one source of truth): its quadrature points of the
   sandbox's weather transposed the same way and averaged (the expectation of the POA);
2. cell temperature: `module_temp_c + 3 °C × POA/1000` when the module temperature was
   measured (SAPM's open-rack ΔT), else SAPM open rack (glass/polymer) from the air
   temperature (measured, else the site's typical) and wind 1 m/s;
3. PVWatts DC: `capacity × POA/1000 × (1 + γ (T_cell − 25))`, then the system losses;
4. AC: × the nominal inverter efficiency, limited to `inverter_capacity_kw` when the system
   has one. (A flat efficiency, not PVWatts' part-load curve: anyone can recompute it.)

A `typical` quarter-hour's expected energy is the expectation of steps 2–4 over the typical
sky's quadrature points (each point's POA through the cell temperature, DC and the inverter's
limit, then weighted), not steps 2–4 of the mean POA: the limit cuts bright moments only, so
clipping the mean sky's power let a healthy array oversized for its inverter (DC/AC 2) seem
to underperform by ~10 % all year (1.5: ~3 %).

Each quarter-hour is evaluated at its midpoint, since its irradiance is a quarter-hour mean.
The geometry and the clear/typical sky of a site depend on nothing but the place and the
time, so they are cached per system geometry and UTC month (`_months`); what depends on
uploaded data is a few array operations per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pvlib

from solarapi.kit.grid import QUARTER_S, FloatArray
from solarapi.models.systems import ModelParameters
from solarapi.performance.values import (
    ALBEDO,
    CLEAR_SKY_MARGIN,
    MODULE_DELTA_T_C,
    SAPM_A,
    SAPM_B,
    WIND_SPEED_M_S,
    Irradiance,
    Modelled,
    Plant,
    Source,
)
from solarapi.sandbox import model as sandbox
from solarapi.sandbox.cache import BoundedCache
from solarapi.sandbox.climate import reference_site
from solarapi.sandbox.utc_months import gather_months, utc_months
from solarapi.sandbox.weather import TYPICAL_WEIGHTS

# A month of one plant's geometry is ~9 arrays × 3,000 floats ≈ 220 KB, plus the typical
# sky's 64 quadrature points at its ~1,500 lit quarter-hours in float32 ≈ 380 KB: 120 months
# ≈ 70 MB.
MAX_CACHED_MONTHS = 120


@dataclass(frozen=True, slots=True)
class _Geometry:
    """The place-and-time part of a month: POA of the clear and the typical sky, the typical
    air temperature, and what transposing a satellite quarter-hour needs."""

    apparent_zenith: FloatArray
    azimuth: FloatArray
    dni_extra: FloatArray
    clear_poa: FloatArray
    # The most a panel can see: the clear sky's POA, or with the sun behind or beside the
    # panel, a sky as bright as the clear sky's horizontal global (overcast light is diffuse
    # and reaches a panel the beam does not).
    bound_poa: FloatArray
    typical_poa: FloatArray
    typical_temp_air_c: FloatArray


@dataclass(frozen=True, slots=True)
class _Month:
    """A UTC month's geometry and the typical sky's POA per quadrature point at its lit
    quarter-hours (`lit`: the clear sky's GHI > 0; `typical_points`: points × lit quarter-hours,
    float32; the other quarter-hours have no irradiance at any point)."""

    geometry: _Geometry
    lit: npt.NDArray[np.bool_]
    typical_points: npt.NDArray[np.float32]


_months: BoundedCache[tuple[float, float, float, float, int], _Month] = BoundedCache(
    MAX_CACHED_MONTHS
)
# A plant's typical expected and reference energy per UTC month (2 × ~3,000 floats ≈ 48 KB):
# what `model` reads for `typical` quarter-hours, so a cached month costs no weather points.
_typical_months: BoundedCache[tuple[Plant, ModelParameters, int], tuple[FloatArray, FloatArray]] = (
    BoundedCache(4 * MAX_CACHED_MONTHS)
)


def climate_of(plant: Plant) -> str | None:
    """The reference site whose normals the `typical` sky follows (None: latitude climatology)."""
    site = reference_site(plant.latitude, plant.longitude)
    return None if site is None else site.name


def is_cached(plant: Plant, start_s: int, end_s: int) -> bool:
    """Whether modelling [start_s, end_s) needs no new geometry (callers skip the thread hop)."""
    return all(_months.peek((*_place(plant), lo)) for lo, _, _, _ in utc_months(start_s, end_s))


def prepare(plant: Plant, start_s: int, end_s: int) -> None:
    """Compute and cache the geometry of every UTC month of [start_s, end_s) that is not
    cached yet (CPU-bound: the service runs it on a worker thread while it reads the data)."""
    for month_start_s, month_end_s, _, _ in utc_months(start_s, end_s):
        _month_geometry(plant, month_start_s, month_end_s)


def clear_cache() -> None:
    """Forget the cached geometry (benchmarks measure cold runs with it)."""
    _months.clear()
    _typical_months.clear()


def model(plant: Plant, parameters: ModelParameters, inputs: Irradiance) -> Modelled:
    """Expected energy of every quarter-hour of `inputs.starts` (a contiguous run of
    quarter-hours on the UTC grid)."""
    starts = inputs.starts
    if len(starts) == 0:
        empty = np.zeros(0)
        return Modelled(
            starts, np.zeros(0, np.int64), empty, empty, empty, empty, empty, empty, empty
        )
    start_s, end_s = int(starts[0]), int(starts[-1]) + QUARTER_S
    geometry = _geometry(plant, start_s, end_s)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        typical_expected, typical_reference = _typical_fields(plant, parameters, start_s, end_s)
        modelled = _model(plant, parameters, inputs, geometry, typical_expected)
        # A `typical` quarter-hour's expected and reference energy: their expectation over the
        # typical sky's quadrature points (`_typical_energy`). (The POA itself, and so the
        # insolation, is already the points' mean.)
        typical = modelled.source == Source.TYPICAL
        modelled.expected_wh[typical] = typical_expected[typical]
        modelled.reference_wh[typical] = typical_reference[typical]
        return modelled


def _model(
    plant: Plant,
    parameters: ModelParameters,
    inputs: Irradiance,
    geometry: _Geometry,
    typical_expected_wh: FloatArray,
) -> Modelled:
    sensor = ~np.isnan(inputs.sensor_poa_w_m2)
    satellite = ~sensor & ~np.isnan(inputs.satellite_ghi_w_m2)
    source = np.where(sensor, Source.SENSOR, np.where(satellite, Source.SATELLITE, Source.TYPICAL))
    poa = geometry.typical_poa.copy()
    poa[sensor] = inputs.sensor_poa_w_m2[sensor]
    if satellite.any():
        poa[satellite] = transpose(
            plant,
            geometry.apparent_zenith[satellite],
            geometry.azimuth[satellite],
            geometry.dni_extra[satellite],
            inputs.satellite_ghi_w_m2[satellite],
            inputs.satellite_dni_w_m2[satellite],
            inputs.satellite_dhi_w_m2[satellite],
        )
    # Air temperature: measured with the irradiance where it was, else the site's typical.
    air = geometry.typical_temp_air_c.copy()
    measured_air = np.where(sensor, inputs.sensor_ambient_temp_c, inputs.satellite_temp_air_c)
    has_air = ~np.isnan(measured_air)
    air[has_air] = measured_air[has_air]
    temp_cell = cell_temperature(poa, air, np.where(sensor, inputs.sensor_module_temp_c, np.nan))
    reference_w = dc_power(plant, parameters, poa, temp_cell)
    expected_w = ac_power(plant, parameters, reference_w)
    clear_reference = dc_power(plant, parameters, geometry.clear_poa, temp_cell)
    hours = QUARTER_S / 3600
    return Modelled(
        starts=inputs.starts,
        source=source.astype(np.int64),
        poa_w_m2=poa,
        temp_cell_c=temp_cell,
        expected_wh=expected_w * hours,
        reference_wh=reference_w * hours,
        clear_sky_bound_wh=plant.capacity_kwp * geometry.bound_poa * hours * CLEAR_SKY_MARGIN,
        clear_sky_expected_wh=ac_power(plant, parameters, clear_reference) * hours,
        typical_expected_wh=typical_expected_wh,
    )


def _typical_fields(
    plant: Plant, parameters: ModelParameters, start_s: int, end_s: int
) -> tuple[FloatArray, FloatArray]:
    """The typical expected and reference energy of every quarter-hour of [start_s, end_s)
    (`_typical_energy`, cut from its cached UTC months)."""

    def month_field(index: int) -> FloatArray:
        return gather_months(
            start_s,
            end_s,
            lambda _year, _month_number, lo, hi: _typical_energy(plant, parameters, lo, hi)[index],
        )

    return month_field(0), month_field(1)


def _typical_energy(
    plant: Plant, parameters: ModelParameters, month_start_s: int, month_end_s: int
) -> tuple[FloatArray, FloatArray]:
    """A UTC month's typical expected AC energy and temperature-corrected reference energy
    (Wh per quarter-hour): each quadrature point's POA through the cell temperature, DC and
    AC with the inverter's limit, then weighted. Cached per plant, parameters and month."""
    key = (plant, parameters, month_start_s)
    cached = _typical_months.get(key)
    if cached is not None:
        return cached
    month = _month(plant, month_start_s, month_end_s)
    expected: FloatArray = np.zeros(len(month.lit))
    reference: FloatArray = np.zeros(len(month.lit))
    if month.lit.any():
        poa = month.typical_points.astype(np.float64)
        air = np.broadcast_to(month.geometry.typical_temp_air_c[month.lit], poa.shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            temp_cell = cell_temperature(poa, air, np.full(poa.shape, np.nan))
            reference_w = dc_power(plant, parameters, poa, temp_cell)
            expected_w = ac_power(plant, parameters, reference_w)
        hours = QUARTER_S / 3600
        expected[month.lit] = (TYPICAL_WEIGHTS @ expected_w) * hours
        reference[month.lit] = (TYPICAL_WEIGHTS @ reference_w) * hours
    expected.flags.writeable = False  # shared through the cache
    reference.flags.writeable = False
    _typical_months.put(key, (expected, reference))
    return expected, reference


def transpose(
    plant: Plant,
    apparent_zenith: FloatArray,
    solar_azimuth: FloatArray,
    dni_extra: FloatArray,
    ghi: FloatArray,
    dni: FloatArray,
    dhi: FloatArray,
) -> FloatArray:
    """Plane-of-array global irradiance (W/m²) from GHI/DNI/DHI: Hay–Davies, albedo 0.2."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        poa = pvlib.irradiance.get_total_irradiance(
            plant.tilt_deg,
            plant.azimuth_deg,
            apparent_zenith,
            solar_azimuth,
            dni,
            ghi,
            dhi,
            dni_extra=dni_extra,
            albedo=ALBEDO,
            model="haydavies",
        )
    return np.maximum(_clean(poa["poa_global"]), 0.0)


def cell_temperature(
    poa_w_m2: FloatArray, temp_air_c: FloatArray, module_temp_c: FloatArray
) -> FloatArray:
    """Cell temperature (°C): from the module temperature where measured (+ ΔT × POA/1000),
    else SAPM open rack from the air temperature at wind 1 m/s."""
    sapm = np.asarray(
        pvlib.temperature.sapm_cell(
            poa_w_m2, temp_air_c, WIND_SPEED_M_S, SAPM_A, SAPM_B, MODULE_DELTA_T_C
        ),
        dtype=np.float64,
    )
    from_module = module_temp_c + MODULE_DELTA_T_C * poa_w_m2 / 1000.0
    result: FloatArray = np.where(np.isnan(module_temp_c), sapm, from_module)
    return result


def dc_power(
    plant: Plant, parameters: ModelParameters, poa_w_m2: FloatArray, temp_cell_c: FloatArray
) -> FloatArray:
    """PVWatts DC at the array's nameplate (W): capacity × POA/1000 × (1 + γ (T_cell − 25)),
    before losses."""
    dc = pvlib.pvsystem.pvwatts_dc(
        poa_w_m2, temp_cell_c, plant.capacity_kwp * 1000.0, parameters.gamma_pdc_pct_per_c / 100
    )
    return np.maximum(_clean(dc), 0.0)


def ac_power(plant: Plant, parameters: ModelParameters, dc_w: FloatArray) -> FloatArray:
    """AC (W): DC × (1 − losses) × the nominal inverter efficiency, clipped at the inverter's
    AC rating when the system has one."""
    ac = dc_w * (1 - parameters.losses_pct / 100) * parameters.inverter_efficiency
    if plant.inverter_capacity_kw is not None:
        ac = np.minimum(ac, plant.inverter_capacity_kw * 1000.0)
    result: FloatArray = ac
    return result


def _place(plant: Plant) -> tuple[float, float, float, float]:
    return (plant.latitude, plant.longitude, plant.tilt_deg, plant.azimuth_deg)


def _geometry(plant: Plant, start_s: int, end_s: int) -> _Geometry:
    def month_field(name: str) -> FloatArray:
        return gather_months(
            start_s,
            end_s,
            lambda _year, _month_number, lo, hi: getattr(_month_geometry(plant, lo, hi), name),
        )

    return _Geometry(*(month_field(name) for name in _Geometry.__dataclass_fields__))


def _month_geometry(plant: Plant, month_start_s: int, month_end_s: int) -> _Geometry:
    return _month(plant, month_start_s, month_end_s).geometry


def _month(plant: Plant, month_start_s: int, month_end_s: int) -> _Month:
    key = (*_place(plant), month_start_s)
    cached = _months.get(key)
    if cached is not None:
        return cached
    midpoints = np.arange(month_start_s, month_end_s, QUARTER_S, dtype=np.int64) + QUARTER_S // 2
    sky = sandbox.sky(plant.latitude, plant.longitude, midpoints)
    lit, points64 = _typical_poa_points(plant, sky)
    points = points64.astype(np.float32)  # kept per month: W/m² to well under a milliwatt
    clear_poa = transpose(
        plant,
        sky.apparent_zenith,
        sky.azimuth,
        sky.dni_extra,
        sky.clear_ghi,
        sky.clear_dni,
        sky.clear_dhi,
    )
    geometry = _Geometry(
        apparent_zenith=sky.apparent_zenith,
        azimuth=sky.azimuth,
        dni_extra=sky.dni_extra,
        clear_poa=clear_poa,
        bound_poa=np.maximum(clear_poa, sky.clear_ghi),
        typical_poa=_mean_of_points(lit, points64, sky.typical_weights),
        typical_temp_air_c=sky.typical_temp_air_c,
    )
    for values in (
        geometry.apparent_zenith,
        geometry.azimuth,
        geometry.dni_extra,
        geometry.clear_poa,
        geometry.bound_poa,
        geometry.typical_poa,
        geometry.typical_temp_air_c,
        lit,
        points,
    ):
        values.flags.writeable = False  # shared through the cache
    month = _Month(geometry, lit, points)
    _months.put(key, month)
    return month


def _mean_of_points(
    lit: npt.NDArray[np.bool_], points: FloatArray, weights: FloatArray
) -> FloatArray:
    """The typical sky's POA: the weighted mean of its quadrature points (the expectation
    over the sandbox's weather, not the POA of an average sky); 0 W/m² where nothing is lit."""
    typical: FloatArray = np.zeros(len(lit))
    typical[lit] = weights @ points
    return typical


def _typical_poa_points(plant: Plant, sky: sandbox.Sky) -> tuple[npt.NDArray[np.bool_], FloatArray]:
    """The typical sky's quadrature points transposed onto the panel, at the lit instants
    (points × lit)."""
    count = len(sky.typical_weights)
    lit = sky.clear_ghi > 0  # no irradiance at all elsewhere: 0 W/m²
    poa = transpose(
        plant,
        np.tile(sky.apparent_zenith[lit], count),
        np.tile(sky.azimuth[lit], count),
        np.tile(sky.dni_extra[lit], count),
        sky.typical_ghi[:, lit].ravel(),
        sky.typical_dni[:, lit].ravel(),
        sky.typical_dhi[:, lit].ravel(),
    )
    points: FloatArray = poa.reshape(count, int(np.count_nonzero(lit)))
    return lit, points


def _clean(values: Any) -> FloatArray:
    """pvlib answers NaN below the horizon in some steps: no sun, 0 W/m²."""
    return np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
