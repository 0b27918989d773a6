"""A `typical` quarter-hour expects the typical sky's energy *in expectation*: each weather
point of the sky (`sandbox.model.sky`'s quadrature points) through the whole chain — POA, cell
temperature, DC, the inverter's limit — then weighted. Clipping the power of the mean sky
instead cut nothing on a bright summer noon (the mean sky is never bright), so an array twice
its inverter seemed to make ~10 % less than expected all year.

Recomputed here with pvlib called directly on the sky's points, not through
`solarapi.performance.model`."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pvlib
import pytest

from solarapi.models.systems import DEFAULT_MODEL
from solarapi.performance import model
from solarapi.performance.values import Irradiance, Plant
from solarapi.sandbox.model import sky

LATITUDE, LONGITUDE, TILT, AZIMUTH = 40.42, -3.70, 30.0, 180.0  # Madrid, facing south
CAPACITY_KWP = 8.0


def _june_starts() -> np.ndarray:
    start = int(datetime(2025, 6, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2025, 7, 1, tzinfo=UTC).timestamp())
    return np.arange(start, end, 900, dtype=np.int64)


def _expected_by_hand(starts: np.ndarray, inverter_kw: float | None) -> float:
    """Σ over the quarter-hours of Σ_j w_j × AC(POA_j) × ¼ h, the contract's chain per point."""
    site = sky(LATITUDE, LONGITUDE, starts + 450)
    total = 0.0
    for weight, ghi, dni, dhi in zip(
        site.typical_weights, site.typical_ghi, site.typical_dni, site.typical_dhi, strict=True
    ):
        poa = pvlib.irradiance.get_total_irradiance(
            TILT,
            AZIMUTH,
            site.apparent_zenith,
            site.azimuth,
            dni,
            ghi,
            dhi,
            dni_extra=site.dni_extra,
            albedo=0.2,
            model="haydavies",
        )["poa_global"]
        poa = np.maximum(np.nan_to_num(np.asarray(poa, dtype=np.float64)), 0.0)
        cell = pvlib.temperature.sapm_cell(poa, site.typical_temp_air_c, 1.0, -3.56, -0.075, 3.0)
        dc = CAPACITY_KWP * poa * (1 - 0.0037 * (np.asarray(cell) - 25))
        ac = np.maximum(dc, 0.0) * (1 - 0.14) * 0.96
        if inverter_kw is not None:
            ac = np.minimum(ac, inverter_kw * 1000)
        total += weight * float(ac.sum()) / 4
    return total


@pytest.mark.parametrize("inverter_kw", [None, 6.0, 4.0], ids=["no limit", "DC/AC 1.33", "DC/AC 2"])
def test_a_typical_month_expects_the_energy_of_its_weather_points(
    inverter_kw: float | None,
) -> None:
    starts = _june_starts()
    plant = Plant(LATITUDE, LONGITUDE, CAPACITY_KWP, inverter_kw, TILT, AZIMUTH)
    modelled = model.model(plant, DEFAULT_MODEL, Irradiance.none(starts))
    assert modelled.expected_wh.sum() == pytest.approx(
        _expected_by_hand(starts, inverter_kw), rel=1e-5
    )


def test_a_typical_range_is_the_slice_of_a_longer_one() -> None:
    """The expectation is cut from whole cached months: any range gives the same quarter-hours
    as a longer range holding it (here across a month's edge)."""
    plant = Plant(LATITUDE, LONGITUDE, CAPACITY_KWP, 4.0, TILT, AZIMUTH)
    long = np.arange(
        int(datetime(2025, 5, 20, tzinfo=UTC).timestamp()),
        int(datetime(2025, 6, 10, tzinfo=UTC).timestamp()),
        900,
        dtype=np.int64,
    )
    whole = model.model(plant, DEFAULT_MODEL, Irradiance.none(long))
    part = model.model(plant, DEFAULT_MODEL, Irradiance.none(long[700:1500]))
    assert np.array_equal(part.expected_wh, whole.expected_wh[700:1500])
    assert np.array_equal(part.reference_wh, whole.reference_wh[700:1500])
    assert np.array_equal(part.poa_w_m2, whole.poa_w_m2[700:1500])
