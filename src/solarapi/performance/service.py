"""Rules of performance: expected against actual, per quarter-hour and per bucket.

Public API for other areas (alerts, dashboard, reports) — typed values, no HTTP:
- `quarter_hours(session, system, start_s, end_s, now) -> QuarterHourPerformance`: measured
  and expected energy (and the model's inputs) for every quarter-hour of [start_s, end_s);
- `performance(session, system, start, end, interval, now) -> Performance`: the buckets of
  `GET /systems/{id}/performance` (interval 1d, 1w or 1M; any interval in process) for a
  system already in hand; `Performance.figures()` and `.total()` give the figures as the API
  does (the dashboard and the PDF report show them).

The path of a request: the range is widened once (`kit.grid`), the quarter-hours of readings
(`readings.service.quarter_hours`, stored or simulated) and of irradiance are read once, the
model runs once (off the event loop unless its geometry is cached), the sums go into the
buckets (a `bincount` each), and the router renders the typed `Performance`.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import sys
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.kit.grid import (
    QUARTER_S,
    FloatArray,
    IntArray,
    Interval,
    TimeRange,
    bucket_edges,
    widen_range,
)
from solarapi.models.systems import (
    ModelParameters,
    ReadableSystem,
    model_overrides,
    model_parameters,
)
from solarapi.performance import repository
from solarapi.performance.quality import FLAGS, MIN_COVERAGE, quality_flags
from solarapi.performance.repository import IrradianceRows
from solarapi.performance.values import Irradiance, Modelled, Plant, Source
from solarapi.readings import service as readings
from solarapi.systems.access import read_system
from solarapi.systems.span import simulated_since

INTERVALS = (Interval.DAY, Interval.WEEK, Interval.MONTH)
_MODEL_MODULE = "solarapi.performance.model"
_SANDBOX_MODULE = "solarapi.sandbox.model"


@dataclass(frozen=True, slots=True)
class QuarterHourPerformance:
    """Every quarter-hour of a range: measured energy (NaN = no reading) beside the model's
    figures (`modelled`: expected energy, POA, cell temperature, source, …)."""

    starts: IntArray
    energy_wh: FloatArray
    modelled: Modelled


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Every parameter the model used (`meta.model`)."""

    capacity_kwp: float
    inverter_capacity_kw: float | None
    latitude: float
    longitude: float
    tilt_deg: float
    azimuth_deg: float
    orientation_defaults: tuple[str, ...]
    parameters: ModelParameters
    overrides: tuple[str, ...]
    typical_climate: str | None


@dataclass(frozen=True, slots=True)
class Kpis:
    """Sums per bucket over the quarter-hours that have a reading (NaN: none has)."""

    energy_wh: FloatArray
    expected_energy_wh: FloatArray
    insolation_wh_m2: FloatArray
    reference_energy_wh: FloatArray  # Σ capacity × POA/1000 × (1 + γ (T_cell − 25)) × ¼ h
    samples: IntArray
    expected_samples: IntArray
    typical_samples: IntArray  # counted quarter-hours whose irradiance is `typical`
    sources: tuple[str | None, ...]
    quality: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Figures:
    """One bucket's figures exactly as the API gives them: rounded to 3 decimals, None where
    undefined (no reading; a PR against a typical year; nothing expected)."""

    energy_wh: float | None
    expected_energy_wh: float | None
    insolation_wh_m2: float | None
    irradiance_source: str | None
    specific_yield_kwh_kwp: float | None
    reference_yield_h: float | None
    performance_ratio: float | None
    performance_ratio_temperature_corrected: float | None
    energy_performance_index: float | None
    samples: int
    expected_samples: int
    coverage: float
    quality: tuple[str, ...]

    @property
    def performance_ratio_missing(self) -> str | None:
        """Why the PR is null, in words for people (None when it is given)."""
        if self.performance_ratio is not None:
            return None
        if self.samples == 0:
            return "no readings"
        if self.irradiance_source == "typical":
            return "no measured irradiance (expected from the site's typical year)"
        if self.irradiance_source == "mixed":
            return "measured irradiance for part of the period only"
        return "no irradiance"

    @property
    def energy_performance_index_missing(self) -> str | None:
        """Why the EPI is null, in words for people (None when it is given)."""
        if self.energy_performance_index is not None:
            return None
        return "no readings" if self.samples == 0 else "nothing expected (no sun)"


def figures_of(kpis: Kpis, capacity_kwp: float) -> tuple[Figures, ...]:
    """The `Figures` of every bucket of `kpis` (IEC 61724-1, docs/performance.md)."""
    return tuple(
        _figures(
            energy=float(kpis.energy_wh[i]),
            expected=float(kpis.expected_energy_wh[i]),
            insolation=float(kpis.insolation_wh_m2[i]),
            reference=float(kpis.reference_energy_wh[i]),
            samples=int(kpis.samples[i]),
            expected_samples=int(kpis.expected_samples[i]),
            typical_samples=int(kpis.typical_samples[i]),
            source=kpis.sources[i],
            quality=kpis.quality[i],
            capacity_kwp=capacity_kwp,
        )
        for i in range(len(kpis.samples))
    )


def _figures(
    *,
    energy: float,
    expected: float,
    insolation: float,
    reference: float,
    samples: int,
    expected_samples: int,
    typical_samples: int,
    source: str | None,
    quality: tuple[str, ...],
    capacity_kwp: float,
) -> Figures:
    # A PR against a typical year is not a PR: only when every counted quarter-hour has
    # measured (sensor or satellite) irradiance.
    measured = samples > 0 and typical_samples == 0
    yield_f = energy / 1000 / capacity_kwp
    yield_r = insolation / 1000
    return Figures(
        energy_wh=_number(energy),
        expected_energy_wh=_number(expected),
        insolation_wh_m2=_number(insolation),
        irradiance_source=source,
        specific_yield_kwh_kwp=_number(yield_f),
        reference_yield_h=_number(yield_r),
        performance_ratio=_ratio(yield_f, yield_r) if measured else None,
        performance_ratio_temperature_corrected=_ratio(energy, reference) if measured else None,
        energy_performance_index=_ratio(energy, expected),
        samples=samples,
        expected_samples=expected_samples,
        coverage=round(samples / expected_samples, 3) if expected_samples else 0.0,
        quality=quality,
    )


def _number(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, 3)


def _ratio(numerator: float, denominator: float) -> float | None:
    if math.isnan(numerator) or math.isnan(denominator) or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


@dataclass(frozen=True, slots=True)
class Performance:
    """What `GET /systems/{id}/performance` answers."""

    system_id: str
    timezone: str
    time_range: TimeRange
    buckets: Kpis
    totals: Kpis
    model: ModelInfo
    simulated: bool  # the sandbox model's, up to `now`: not a function of the database alone

    def figures(self) -> tuple[Figures, ...]:
        """Each bucket's figures, as the API gives them."""
        return figures_of(self.buckets, self.model.capacity_kwp)

    def total(self) -> Figures:
        """The whole range's figures (`meta.totals`)."""
        return figures_of(self.totals, self.model.capacity_kwp)[0]


async def read_irradiance(
    session: AsyncSession,
    principal: Principal,
    system_id: str,
    start_s: int,
    end_s: int,
    now: datetime,
) -> tuple[IrradianceRows, IrradianceRows]:
    """`GET /systems/{id}/irradiance`: the caller's system's stored `sensor` and `satellite`
    quarter-hours starting in [start_s, end_s). A simulated (sandbox) system stores none:
    its `sensor` rows are the sandbox model's own POA and air temperature, the irradiance its
    performance reports as `sensor` (so its numbers can be recomputed from what the API
    returns, as a metered system's can)."""
    system = await read_system(session, principal, system_id)
    if system.data_source != "simulated":
        return await repository.both_between(session, system.id, start_s, end_s)
    grid = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    measured = await _irradiance(session, system, grid, now)
    kept = ~np.isnan(measured.sensor_poa_w_m2)
    none = np.full(int(np.count_nonzero(kept)), np.nan)
    sensor = IrradianceRows(
        starts=grid[kept],
        poa_w_m2=measured.sensor_poa_w_m2[kept],
        ghi_w_m2=none,
        dni_w_m2=none,
        dhi_w_m2=none,
        module_temp_c=none,
        ambient_temp_c=measured.sensor_ambient_temp_c[kept],
    )
    empty = np.empty(0)
    satellite = IrradianceRows(np.empty(0, dtype=np.int64), *([empty] * 6))
    return sensor, satellite


def plant_of(system: ReadableSystem) -> Plant:
    return Plant(
        latitude=system.latitude,
        longitude=system.longitude,
        capacity_kwp=system.capacity_kwp,
        inverter_capacity_kw=system.inverter_capacity_kw,
        tilt_deg=system.tilt_deg,
        azimuth_deg=system.azimuth_deg,
    )


def data_version(system: ReadableSystem) -> Hashable | None:
    """What a performance answer of `system` is a function of, besides the request: its
    `data_version` (raised with every write to its readings or irradiance) and every system
    field the model and the buckets use. Equal values, equal answers — so an answer is kept
    while this holds, whatever other systems commit meanwhile. None for a simulated system
    (its answer depends on `now`)."""
    if system.data_source == "simulated":
        return None
    return (
        system.data_version,
        plant_of(system),
        model_parameters(system),
        system.timezone,
        system.tilt_defaulted,
        system.azimuth_defaulted,
        system.first_reading_at,
        system.last_reading_at,
    )


async def performance(
    session: AsyncSession,
    system: ReadableSystem,
    start: datetime,
    end: datetime,
    interval: Interval,
    now: datetime,
) -> Performance:
    """The buckets of [start, end) widened to the grid of `interval`: the system's local
    calendar for 1d, 1w and 1M (what the endpoint offers, `INTERVALS`); the dashboard's chart
    and the reports also ask for 15m, 30m and 1h buckets, for which `time_shift` (a property
    of a day's curve) is not looked for."""
    tz = ZoneInfo(system.timezone)
    time_range = widen_range(start, end, interval, tz)
    lo, hi = _reading_span(system, time_range.start_s, time_range.end_s, now)
    series = await quarter_hours(session, system, lo, hi, now)
    edges = time_range.edges()
    day_edges = bucket_edges(time_range.start_s, time_range.end_s, Interval.DAY, tz)
    buckets = _kpis(system, series, edges, day_edges)
    # The range's flags: its own coverage, and whatever any bucket showed.
    shown = {flag for flags in buckets.quality for flag in flags if flag != "gap"}
    totals = _kpis(
        system,
        series,
        np.array([time_range.start_s, time_range.end_s], dtype=np.int64),
        day_edges,
        found=tuple(flag for flag in FLAGS if flag in shown),
    )
    return Performance(
        system_id=system.id,
        timezone=system.timezone,
        time_range=time_range,
        buckets=buckets,
        totals=totals,
        model=model_info(system),
        simulated=system.data_source == "simulated",
    )


def _reading_span(
    system: ReadableSystem, start_s: int, end_s: int, now: datetime
) -> tuple[int, int]:
    """The part of [start_s, end_s) that can hold a reading — from the system's first stored
    quarter-hour (a simulated one's history start) to the last one that has ended — so
    that nothing is read or modelled outside it: the buckets there have no reading anyway,
    and a range of 10,000 monthly buckets would otherwise model 833 years."""
    now_s = int(now.timestamp() // 1)
    lo, hi = start_s, min(end_s, now_s - now_s % QUARTER_S)
    if system.data_source == "simulated":
        lo = max(lo, simulated_since(system))
    elif system.first_reading_at is None or system.last_reading_at is None:
        return start_s, start_s
    else:
        lo = max(lo, int(system.first_reading_at.timestamp()))
        hi = min(hi, int(system.last_reading_at.timestamp()) + QUARTER_S)
    lo -= lo % QUARTER_S  # (stored starts are on the grid; the range's edges are too)
    return (lo, hi) if hi > lo else (start_s, start_s)


def model_info(system: ReadableSystem) -> ModelInfo:
    from solarapi.sandbox.climate import reference_site

    site = reference_site(system.latitude, system.longitude)
    defaults = tuple(
        name
        for name, defaulted in (
            ("tilt_deg", system.tilt_defaulted),
            ("azimuth_deg", system.azimuth_defaulted),
        )
        if defaulted
    )
    return ModelInfo(
        capacity_kwp=system.capacity_kwp,
        inverter_capacity_kw=system.inverter_capacity_kw,
        latitude=system.latitude,
        longitude=system.longitude,
        tilt_deg=system.tilt_deg,
        azimuth_deg=system.azimuth_deg,
        orientation_defaults=defaults,
        parameters=model_parameters(system),
        overrides=model_overrides(system),
        typical_climate=None if site is None else site.name,
    )


async def quarter_hours(
    session: AsyncSession, system: ReadableSystem, start_s: int, end_s: int, now: datetime
) -> QuarterHourPerformance:
    """Measured and expected energy of every quarter-hour of [start_s, end_s) (UTC, aligned
    to the quarter-hour). Quarter-hours without measured irradiance are modelled with the
    site's typical year; those not yet ended have no reading."""
    plant = plant_of(system)
    # The site's geometry depends on nothing read here: a cold one is modelled on a worker
    # thread while the readings and the irradiance are read on the event loop.
    geometry = asyncio.ensure_future(_prepare_model(plant, start_s, end_s))
    try:
        measured = await readings.quarter_hours(
            session,
            system,
            datetime.fromtimestamp(start_s, UTC),
            datetime.fromtimestamp(end_s, UTC),
            now,
        )
        inputs = await _irradiance(session, system, measured.starts, now)
    except BaseException:
        # The thread runs on regardless (what it makes is cached); its outcome is not needed.
        geometry.add_done_callback(_forget)
        raise
    await geometry
    from solarapi.performance import model  # start-up: imported by `_prepare_model`

    parameters = model_parameters(system)
    if end_s <= start_s or model.is_cached(plant, start_s, end_s):
        modelled = model.model(plant, parameters, inputs)  # ~2 ms a year on cached geometry
    else:  # evicted meanwhile by other requests' (the cache is bounded): off the loop again
        modelled = await asyncio.to_thread(model.model, plant, parameters, inputs)
    return QuarterHourPerformance(measured.starts, measured.energy_wh, modelled)


async def _prepare_model(plant: Plant, start_s: int, end_s: int) -> None:
    """The model imported and the geometry of [start_s, end_s) cached, off the event loop
    when either costs: the import of pvlib, pandas and scipy takes seconds (the first
    performance request); a system-year's geometry ~60 ms of CPU (`bench/performance/`)."""
    if _MODEL_MODULE not in sys.modules:
        await asyncio.to_thread(importlib.import_module, _MODEL_MODULE)
    from solarapi.performance import model  # start-up: loaded just above

    if end_s > start_s and not model.is_cached(plant, start_s, end_s):
        await asyncio.to_thread(model.prepare, plant, start_s, end_s)


def _forget(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


async def _irradiance(
    session: AsyncSession, system: ReadableSystem, starts: IntArray, now: datetime
) -> Irradiance:
    """The measured irradiance of each quarter-hour of `starts` (NaN where none)."""
    inputs = Irradiance.none(starts)
    if len(starts) == 0:
        return inputs
    start_s, end_s = int(starts[0]), int(starts[-1]) + QUARTER_S
    columns = {name: np.full(len(starts), np.nan) for name in _INPUT_COLUMNS}
    if system.data_source == "simulated":
        await _simulated_irradiance(system, start_s, end_s, now, columns)
    else:
        stored = await repository.model_inputs_between(session, system.id, start_s, end_s)
        for names, at, values in (
            (_SENSOR_COLUMNS, stored.sensor_starts, stored.sensor),
            (_SATELLITE_COLUMNS, stored.satellite_starts, stored.satellite),
        ):
            for i, name in enumerate(names):
                _place(starts, at, columns[name], values[:, i])
    return Irradiance(starts, **columns)


# `Irradiance`'s fields, in the order of `repository.ModelInputs`' columns.
_SENSOR_COLUMNS = ("sensor_poa_w_m2", "sensor_module_temp_c", "sensor_ambient_temp_c")
_SATELLITE_COLUMNS = (
    "satellite_ghi_w_m2",
    "satellite_dni_w_m2",
    "satellite_dhi_w_m2",
    "satellite_temp_air_c",
)
_INPUT_COLUMNS = _SENSOR_COLUMNS + _SATELLITE_COLUMNS


async def _simulated_irradiance(
    system: ReadableSystem, start_s: int, end_s: int, now: datetime, columns: dict[str, FloatArray]
) -> None:
    """A simulated system's `sensor` irradiance: the sandbox model's own POA and air
    temperature over the quarter-hours it has simulated readings for."""
    now_s = int(now.timestamp() // 1)
    lo, hi = max(start_s, simulated_since(system)), min(end_s, now_s - now_s % QUARTER_S)
    if hi <= lo:
        return
    if _SANDBOX_MODULE not in sys.modules:
        # start-up: the sandbox model pulls in pvlib (seconds to import, measured): on a thread.
        await asyncio.to_thread(importlib.import_module, _SANDBOX_MODULE)
    from solarapi.sandbox import model as sandbox  # start-up: loaded just above

    params = sandbox.PvParams.of(system)
    start, end = datetime.fromtimestamp(lo, UTC), datetime.fromtimestamp(hi, UTC)
    if sandbox.is_cached(params, start, end):
        conditions = sandbox.simulated_conditions(params, start, end)
    else:
        conditions = await asyncio.to_thread(sandbox.simulated_conditions, params, start, end)
    grid = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    _place(grid, conditions.starts, columns["sensor_poa_w_m2"], conditions.poa_w_m2)
    _place(grid, conditions.starts, columns["sensor_ambient_temp_c"], conditions.temp_air_c)


def _place(grid: IntArray, at: IntArray, target: FloatArray, values: FloatArray) -> None:
    if len(grid) == 0 or len(at) == 0:
        return
    index = (at - grid[0]) // QUARTER_S
    inside = (index >= 0) & (index < len(grid))
    target[index[inside]] = values[inside]


def _kpis(
    system: ReadableSystem,
    series: QuarterHourPerformance,
    edges: IntArray,
    day_edges: IntArray,
    found: tuple[str, ...] | None = None,
) -> Kpis:
    """The sums of each bucket of `edges`, with its flags (`found`: the flags other than
    `gap` already known for a single bucket, which are then not looked for again). Each sum
    is one `bincount` over the counted quarter-hours in time order (the arithmetic of
    `kit.grid.aggregate_into`, without its power maximum)."""
    starts = series.starts
    modelled = series.modelled
    count = len(edges) - 1
    bucket = np.searchsorted(edges, starts, side="right") - 1
    counted = ~np.isnan(series.energy_wh) & (bucket >= 0) & (bucket < count)
    at = bucket[counted]
    samples = np.bincount(at, minlength=count).astype(np.int64)
    empty = samples == 0

    def total(values: FloatArray) -> FloatArray:
        summed = np.bincount(at, weights=values[counted], minlength=count).astype(
            np.float64, copy=False
        )
        summed[empty] = np.nan
        return summed

    energy = total(series.energy_wh)
    expected = total(modelled.expected_wh)
    insolation = total(modelled.poa_w_m2 * (QUARTER_S / 3600))
    reference = total(modelled.reference_wh)
    counted_sources = modelled.source[counted]
    counts = {
        source: np.bincount(at[counted_sources == source], minlength=count).astype(np.int64)
        for source in Source
    }
    sources = tuple(
        _source_label([source for source in Source if counts[source][i] > 0]) for i in range(count)
    )
    expected_samples = (np.diff(edges) // QUARTER_S).astype(np.int64)
    coverage = samples / np.maximum(expected_samples, 1)
    if found is not None:
        gap = ("gap",) if coverage[0] < MIN_COVERAGE else ()
        return _with_flags(energy, expected, insolation, reference, samples, expected_samples,
                           counts[Source.TYPICAL], sources, [(*gap, *found)])  # fmt: skip
    day = np.searchsorted(day_edges, starts, side="right") - 1
    valid_day = (day >= 0) & (day < len(day_edges) - 1)
    day_slot = np.where(
        valid_day, (starts - day_edges[np.clip(day, 0, len(day_edges) - 1)]) // QUARTER_S, -1
    )
    flags = quality_flags(
        bucket=bucket,
        bucket_count=count,
        coverage=coverage,
        day=np.where(valid_day, day, -1),
        day_count=max(len(day_edges) - 1, 0),
        day_slot=day_slot,
        energy_wh=series.energy_wh,
        clear_sky_bound_wh=modelled.clear_sky_bound_wh,
        clear_sky_expected_wh=modelled.clear_sky_expected_wh,
        typical_expected_wh=modelled.typical_expected_wh,
        capacity_kwp=system.capacity_kwp,
        inverter_capacity_kw=system.inverter_capacity_kw,
        whole_days=bool(len(edges)) and _whole_days(edges, day_edges),
    )
    return _with_flags(energy, expected, insolation, reference, samples, expected_samples,
                       counts[Source.TYPICAL], sources, flags)  # fmt: skip


def _whole_days(edges: IntArray, day_edges: IntArray) -> bool:
    """Whether every bucket is made of whole local days (its edges are day edges)."""
    return bool(np.isin(edges, day_edges).all())


def _with_flags(
    energy: FloatArray,
    expected: FloatArray,
    insolation: FloatArray,
    reference: FloatArray,
    samples: IntArray,
    expected_samples: IntArray,
    typical_samples: IntArray,
    sources: tuple[str | None, ...],
    flags: list[tuple[str, ...]],
) -> Kpis:
    return Kpis(
        energy_wh=energy,
        expected_energy_wh=expected,
        insolation_wh_m2=insolation,
        reference_energy_wh=reference,
        samples=samples,
        expected_samples=expected_samples,
        typical_samples=typical_samples,
        sources=sources,
        quality=tuple(flags),
    )


def _source_label(sources: list[Source]) -> str | None:
    if not sources:
        return None
    return sources[0].label if len(sources) == 1 else "mixed"
