"""CAMS radiation-service CSV files made for the tests, in the service's format (version 4
header, `;`-separated, values in Wh/m² per step, periods as `start/end`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

_STEP_TEXT = {
    timedelta(minutes=15): "0 year 0 month 0 day 0 h 15 min 0 s",
    timedelta(minutes=1): "0 year 0 month 0 day 0 h 1 min 0 s",
    timedelta(hours=1): "0 year 0 month 0 day 1 h 0 min 0 s",
}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.0")


def write_cams(
    path: Path,
    *,
    latitude: float,
    longitude: float,
    start: datetime,
    ghi_dni_dhi_w_m2: Sequence[tuple[float | str, float | str, float | str]],
    step: timedelta = timedelta(minutes=15),
    time_reference: str = "Universal time (UT)",
) -> Path:
    """A file with one row per step from `start` (UTC); irradiances given as W/m² means and
    written as the service writes them, Wh/m² per step (a string is written as is: `nan`)."""
    hours = step.total_seconds() / 3600
    end = start + step * len(ghi_dni_dhi_w_m2)
    lines = [
        "# Coding: utf-8",
        "# File format version: 4",
        "# Title: CAMS Radiation Service v4.6 all-sky irradiation (derived from satellite data).",
        "# Content: A time-series of solar radiation received on horizontal plane and plane "
        "always normal to the sun rays at ground level.",
        "# Provider: MINES ParisTech (France)",
        "# More information at: http://www.soda-pro.com/web-services/radiation/cams-radiation-service",
        f"# Date begin (ISO 8601): {_stamp(start)}",
        f"# Date end (ISO 8601): {_stamp(end)}",
        f"# Latitude (positive North, ISO 19115): {latitude:.4f}",
        f"# Longitude (positive East, ISO 19115): {longitude:.4f}",
        "# Altitude (m): 0.0000",
        f"# Time reference: {time_reference}",
        "# Encoding partly from: ",
        f"# Summarization (integration) period: {_STEP_TEXT[step]}",
        "# Unit for radiation: Wh/m2",
        "#",
        "# Observation period;TOA;Clear sky GHI;Clear sky BHI;Clear sky DHI;Clear sky BNI;"
        "GHI;BHI;DHI;BNI;Reliability",
    ]

    def wh(value: float | str) -> str:
        return value if isinstance(value, str) else f"{value * hours:.4f}"

    for i, (ghi, dni, dhi) in enumerate(ghi_dni_dhi_w_m2):
        lo = start + step * i
        period = f"{_stamp(lo)}/{_stamp(lo + step)}"
        # BHI is not used by the import; any plausible number does.
        lines.append(
            f"{period};0.0000;0.0000;0.0000;0.0000;0.0000;{wh(ghi)};0.0000;{wh(dhi)};{wh(dni)};1.0000"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
