"""Satellite irradiance from CAMS radiation-service CSV files, read with pvlib's
`iotools.read_cams` (no parser of ours), checked, and turned into quarter-hour means.

Where the files come from: the Copernicus Atmosphere Monitoring Service's "CAMS solar
radiation time-series" (Atmosphere Data Store, https://ads.atmosphere.copernicus.eu, free
with an account; also served by SoDa, https://www.soda-pro.com) — choose the site's latitude
and longitude, "Universal time (UT)", a 15-minute (or 1-minute) time step and the CSV format.
docs/performance.md walks through it.

Refused, with one clear message and nothing stored: a file for a place more than 10 km from
the system, a file in true solar time, missing or negative values, time steps other than
1 or 15 minutes, quarter-hours that have not ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pvlib

from solarapi.kit.grid import QUARTER_S, FloatArray, IntArray
from solarapi.kit.timefmt import format_timestamp
from solarapi.sandbox.climate import distance_km

MAX_DISTANCE_KM = 10.0
MAX_IRRADIANCE_W_M2 = 1500.0
_STEPS = {"15min": 1, "1min": 15}


class CamsFileError(Exception):
    """The file cannot be imported; the message says why."""


@dataclass(frozen=True, slots=True)
class SatelliteIrradiance:
    """Quarter-hour means (W/m²) of a CAMS file, in time order."""

    starts: IntArray
    ghi_w_m2: FloatArray
    dni_w_m2: FloatArray
    dhi_w_m2: FloatArray
    latitude: float
    longitude: float

    def __len__(self) -> int:
        return len(self.starts)


# The header of a CAMS file is a few dozen `#` lines ending with the column names.
MAX_HEADER_LINES = 200


def read(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """pvlib's reading of the file; any failure becomes a CamsFileError."""
    # pvlib's reader looks for the `# Observation period` header line until it finds it:
    # on any other file it would read on past the end for ever. Look for it first.
    with path.open(encoding="utf-8", errors="replace") as stream:
        for _, line in zip(range(MAX_HEADER_LINES), stream, strict=False):
            if line.startswith("# Observation period"):
                break
        else:
            raise CamsFileError(
                f"{path.name} is not a CAMS radiation-service CSV file (no '# Observation "
                "period' header line)"
            )
    try:
        data, metadata = pvlib.iotools.read_cams(path, integrated=False, map_variables=True)
    except (KeyError, ValueError, IndexError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise CamsFileError(
            f"{path.name} is not a CAMS radiation-service CSV file that pvlib can read "
            f"({type(exc).__name__}: {str(exc)[:80]})"
        ) from None
    return data, metadata


def satellite_irradiance(
    path: Path, latitude: float, longitude: float, now: datetime
) -> SatelliteIrradiance:
    """The file's quarter-hours for a system at (latitude, longitude)."""
    data, metadata = read(path)
    reference = str(metadata.get("Time reference", ""))
    if "universal" not in reference.lower():
        raise CamsFileError(
            f"the file's time reference is '{reference[:40]}'; only 'Universal time (UT)' is "
            "accepted (true solar time shifts every value by the equation of time); request "
            "the file again with UT"
        )
    file_lat, file_lon = metadata.get("latitude"), metadata.get("longitude")
    if not isinstance(file_lat, float) or not isinstance(file_lon, float):
        raise CamsFileError("the file's header gives no latitude and longitude")
    km = distance_km(latitude, longitude, file_lat, file_lon)
    if km > MAX_DISTANCE_KM:
        raise CamsFileError(
            f"the file is for {file_lat:.4f}, {file_lon:.4f}, {km:.1f} km from the system "
            f"(at most {MAX_DISTANCE_KM:.0f} km); request it for the system's location"
        )
    step = str(metadata.get("time_step"))
    if step not in _STEPS:
        raise CamsFileError(f"the file's time step is {step}; import 15-minute (or 1-minute) data")
    for column in ("ghi", "dni", "dhi"):
        if column not in data.columns:
            raise CamsFileError(f"the file has no {column.upper()} column")
    values = data[["ghi", "dni", "dhi"]].apply(pd.to_numeric, errors="coerce")
    bad = values.isna() | (values < 0) | (values > MAX_IRRADIANCE_W_M2)
    if bad.to_numpy().any():
        row, col = np.argwhere(bad.to_numpy())[0]
        when = format_timestamp(data.index[row].to_pydatetime())
        raw = data[["ghi", "dni", "dhi"]].iloc[row, col]
        raise CamsFileError(
            f"the {values.columns[col].upper()} value of {when} is missing or out of range "
            f"('{raw}'): request the period again or cut it out"
        )
    seconds = pd.DatetimeIndex(data.index).as_unit("s").asi8.astype(np.int64)
    per_quarter = _STEPS[step]
    starts = seconds - seconds % QUARTER_S
    if per_quarter == 1 and bool((seconds % QUARTER_S).any()):
        raise CamsFileError("the file's 15-minute periods do not start on the quarter-hour")
    unique, inverse, counts = np.unique(starts, return_inverse=True, return_counts=True)
    if bool((counts != per_quarter).any()):
        first = format_timestamp(datetime.fromtimestamp(int(unique[counts != per_quarter][0]), UTC))
        raise CamsFileError(
            f"the quarter-hour of {first} is incomplete in the file (a 1-minute file needs all "
            "15 minutes of every quarter-hour)"
        )
    now_s = now.timestamp()
    if len(unique) and unique[-1] + QUARTER_S > now_s:
        raise CamsFileError(
            "the file holds quarter-hours that have not ended yet; CAMS forecasts are not "
            "measurements"
        )
    if len(unique) and unique[0] < 0:
        raise CamsFileError("the file holds times before 1970")

    def means(column: str) -> FloatArray:
        sums = np.bincount(inverse, weights=values[column].to_numpy(dtype=np.float64))
        result: FloatArray = sums / counts
        return result

    return SatelliteIrradiance(
        unique.astype(np.int64),
        means("ghi"),
        means("dni"),
        means("dhi"),
        float(file_lat),
        float(file_lon),
    )
