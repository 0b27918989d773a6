"""The typed values the expected-energy model takes and gives (numpy only: importing this
module does not load pvlib, so callers can name them without paying its start-up)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from solarapi.kit.grid import FloatArray, IntArray

ALBEDO = 0.2
WIND_SPEED_M_S = 1.0
# SAPM's open-rack glass/polymer module (pvlib's TEMPERATURE_MODEL_PARAMETERS["sapm"]
# ["open_rack_glass_polymer"]), the standard module PVWatts assumes. Its ΔT (module back to
# cell at 1,000 W/m²) is the 3 °C the contract adds to a measured module temperature.
SAPM_MOUNT = "open_rack_glass_polymer"
SAPM_A = -3.56
SAPM_B = -0.075
MODULE_DELTA_T_C = 3.0
# The clear-sky bound of the `outlier` flag: clear-sky POA (Ineichen, Hay–Davies) × capacity,
# with this much headroom for cloud-edge enhancement and cold modules.
CLEAR_SKY_MARGIN = 1.3


class Source(enum.IntEnum):
    """Where a quarter-hour's irradiance came from, best first (codes in arrays)."""

    SENSOR = 1
    SATELLITE = 2
    TYPICAL = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Plant:
    """What the model needs to know about a system."""

    latitude: float
    longitude: float
    capacity_kwp: float
    inverter_capacity_kw: float | None
    tilt_deg: float
    azimuth_deg: float


@dataclass(frozen=True, slots=True)
class Irradiance:
    """Measured inputs per quarter-hour starting at `starts` (NaN = not measured). A sensor
    quarter-hour has `poa_w_m2`; a satellite one `ghi/dni/dhi_w_m2`; temperatures are
    optional for either."""

    starts: IntArray
    sensor_poa_w_m2: FloatArray
    sensor_module_temp_c: FloatArray
    sensor_ambient_temp_c: FloatArray
    satellite_ghi_w_m2: FloatArray
    satellite_dni_w_m2: FloatArray
    satellite_dhi_w_m2: FloatArray
    satellite_temp_air_c: FloatArray

    @classmethod
    def none(cls, starts: IntArray) -> Irradiance:
        """No measurement at all: every quarter-hour is `typical`."""
        nan = np.full(len(starts), np.nan)
        return cls(starts, nan, nan, nan, nan, nan, nan, nan)


@dataclass(frozen=True, slots=True)
class Modelled:
    """The model's answer per quarter-hour (energies in Wh over the quarter-hour)."""

    starts: IntArray
    source: IntArray  # Source codes
    poa_w_m2: FloatArray
    temp_cell_c: FloatArray
    expected_wh: FloatArray  # AC energy the system should have produced
    # capacity × POA/1000 × (1 + γ (T_cell − 25)) × ¼ h: the temperature-corrected PR's
    # denominator (DC at the array's nameplate, before losses and the inverter)
    reference_wh: FloatArray
    clear_sky_bound_wh: FloatArray  # the `outlier` flag's ceiling
    clear_sky_expected_wh: FloatArray  # the expected energy under a clear sky (time_shift)
    # The expected energy under the site's typical sky, whatever the quarter-hour's source: the
    # shape a run of ordinary days has (time_shift over several days).
    typical_expected_wh: FloatArray
