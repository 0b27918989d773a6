"""The one JSON rendering of a performance answer (documented by `schemas.PerformanceOut`)
and of stored irradiance (`schemas.IrradianceListOut`)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import numpy as np
import orjson

from solarapi.kit.grid import iso_strings
from solarapi.performance.repository import IrradianceRows
from solarapi.performance.service import Figures, ModelInfo, Performance
from solarapi.performance.values import (
    ALBEDO,
    MODULE_DELTA_T_C,
    SAPM_A,
    SAPM_B,
    SAPM_MOUNT,
    WIND_SPEED_M_S,
)

_PVLIB_VERSION = version("pvlib")


def _figures_to_api(figures: Figures) -> dict[str, Any]:
    return {
        "energy_wh": figures.energy_wh,
        "expected_energy_wh": figures.expected_energy_wh,
        "insolation_wh_m2": figures.insolation_wh_m2,
        "irradiance_source": figures.irradiance_source,
        "specific_yield_kwh_kwp": figures.specific_yield_kwh_kwp,
        "reference_yield_h": figures.reference_yield_h,
        "performance_ratio": figures.performance_ratio,
        "performance_ratio_temperature_corrected": (
            figures.performance_ratio_temperature_corrected
        ),
        "energy_performance_index": figures.energy_performance_index,
        "samples": figures.samples,
        "expected_samples": figures.expected_samples,
        "coverage": figures.coverage,
        "quality": list(figures.quality),
    }


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
    data = [
        {"start": start, "end": end, **_figures_to_api(figures)}
        for start, end, figures in zip(labels, labels[1:], performance.figures(), strict=False)
    ]
    meta = {
        "system_id": performance.system_id,
        "interval": performance.time_range.interval.value,
        "timezone": performance.timezone,
        "from": labels[0],
        "to": labels[-1],
        "totals": _figures_to_api(performance.total()),
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
