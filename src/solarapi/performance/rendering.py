"""The one JSON rendering of a performance answer (documented by `schemas.PerformanceOut`)
and of stored irradiance (`schemas.IrradianceListOut`)."""

from __future__ import annotations

import math
from importlib.metadata import version
from typing import Any

import numpy as np
import orjson

from solarapi.kit.grid import iso_strings
from solarapi.performance.repository import IrradianceRows
from solarapi.performance.service import Kpis, ModelInfo, Performance
from solarapi.performance.values import (
    ALBEDO,
    MODULE_DELTA_T_C,
    SAPM_A,
    SAPM_B,
    SAPM_MOUNT,
    WIND_SPEED_M_S,
)

_PVLIB_VERSION = version("pvlib")


def _number(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, 3)


def _ratio(numerator: float, denominator: float) -> float | None:
    if math.isnan(numerator) or math.isnan(denominator) or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


def _kpi_items(kpis: Kpis, capacity_kwp: float) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(len(kpis.samples)):
        energy = float(kpis.energy_wh[i])
        expected = float(kpis.expected_energy_wh[i])
        insolation = float(kpis.insolation_wh_m2[i])
        reference = float(kpis.reference_energy_wh[i])
        samples = int(kpis.samples[i])
        # A PR against a typical year is not a PR: only when every counted quarter-hour has
        # measured (sensor or satellite) irradiance.
        measured = samples > 0 and int(kpis.typical_samples[i]) == 0
        yield_f = energy / 1000 / capacity_kwp
        yield_r = insolation / 1000
        expected_samples = int(kpis.expected_samples[i])
        items.append(
            {
                "energy_wh": _number(energy),
                "expected_energy_wh": _number(expected),
                "insolation_wh_m2": _number(insolation),
                "irradiance_source": kpis.sources[i],
                "specific_yield_kwh_kwp": _number(yield_f),
                "reference_yield_h": _number(yield_r),
                "performance_ratio": _ratio(yield_f, yield_r) if measured else None,
                "performance_ratio_temperature_corrected": (
                    _ratio(energy, reference) if measured else None
                ),
                "energy_performance_index": _ratio(energy, expected),
                "samples": samples,
                "expected_samples": expected_samples,
                "coverage": round(samples / expected_samples, 3) if expected_samples else 0.0,
                "quality": list(kpis.quality[i]),
            }
        )
    return items


def model_to_api(model: ModelInfo) -> dict[str, Any]:
    parameters = model.parameters
    return {
        "name": "pvwatts",
        "library": f"pvlib {_PVLIB_VERSION}",
        "capacity_kwp": model.capacity_kwp,
        "inverter_capacity_kw": model.inverter_capacity_kw,
        "latitude": model.latitude,
        "longitude": model.longitude,
        "tilt_deg": model.tilt_deg,
        "azimuth_deg": model.azimuth_deg,
        "orientation_defaults": list(model.orientation_defaults),
        "gamma_pdc_pct_per_c": parameters.gamma_pdc_pct_per_c,
        "losses_pct": parameters.losses_pct,
        "inverter_efficiency": parameters.inverter_efficiency,
        "overrides": list(model.overrides),
        "transposition": "haydavies",
        "albedo": ALBEDO,
        "solar_position": "ephemeris",
        "evaluated_at": "quarter-hour midpoint",
        "cell_temperature": "sapm",
        "sapm_mount": SAPM_MOUNT,
        "sapm_a": SAPM_A,
        "sapm_b": SAPM_B,
        "sapm_delta_t_c": MODULE_DELTA_T_C,
        "wind_speed_m_s": WIND_SPEED_M_S,
        "clear_sky": "ineichen",
        "typical_climate": model.typical_climate,
    }


def render(performance: Performance) -> bytes:
    edges = performance.time_range.edges()
    labels = iso_strings(edges)
    capacity = performance.model.capacity_kwp
    data = [
        {"start": start, "end": end, **item}
        for start, end, item in zip(
            labels, labels[1:], _kpi_items(performance.buckets, capacity), strict=False
        )
    ]
    meta = {
        "system_id": performance.system_id,
        "interval": performance.time_range.interval.value,
        "timezone": performance.timezone,
        "from": labels[0],
        "to": labels[-1],
        "totals": _kpi_items(performance.totals, capacity)[0],
        "model": model_to_api(performance.model),
    }
    return orjson.dumps({"data": data, "meta": meta})


def render_irradiance(sensor: IrradianceRows, satellite: IrradianceRows) -> bytes:
    """Stored quarter-hours of both sources, in time order (sensor first within one)."""
    items: list[tuple[int, int, dict[str, Any]]] = []
    for order, source, rows in ((0, "sensor", sensor), (1, "satellite", satellite)):
        labels = iso_strings(rows.starts)
        columns = [
            np.round(values, 3).tolist()
            for values in (
                rows.poa_w_m2,
                rows.module_temp_c,
                rows.ambient_temp_c,
                rows.ghi_w_m2,
                rows.dni_w_m2,
                rows.dhi_w_m2,
            )
        ]
        for i, label in enumerate(labels):
            poa, module, ambient, ghi, dni, dhi = (_nan_none(column[i]) for column in columns)
            items.append(
                (
                    int(rows.starts[i]),
                    order,
                    {
                        "timestamp": label,
                        "source": source,
                        "poa_w_m2": poa,
                        "module_temp_c": module,
                        "ambient_temp_c": ambient,
                        "ghi_w_m2": ghi,
                        "dni_w_m2": dni,
                        "dhi_w_m2": dhi,
                    },
                )
            )
    items.sort(key=lambda item: (item[0], item[1]))
    return orjson.dumps({"data": [item[2] for item in items]})


def _nan_none(value: float) -> float | None:
    return None if value != value else value
