"""Regional climate normals the sandbox weather is calibrated to.

The synthetic weather (`weather.py`) multiplies clear-sky irradiance by a clear-sky index.
How cloudy a place is on average cannot be told from latitude: an inland Brandenburg park
sees about 7 % more sun than a Dutch roof at the same latitude, and Sydney's winter is far
sunnier than its latitude alone suggests. So each reference site below carries its long-term
**mean daily global horizontal irradiation per calendar month** (kWh/m² per day), and the
model derives from it, per day of the year, the mean clear-sky index that reproduces it:
normal ÷ the model's own clear-sky irradiation of that month at the site (`model.py`).

A system within `SITE_RADIUS_KM` of a reference site gets that site's climate; any other
place falls back to a coarse function of latitude and season (`weather.mean_clear_sky_index`).

The figures are rounded long-term monthly means of the national weather services' climate
normals — KNMI De Bilt and DWD Potsdam (1991–2020 global radiation), the Bureau of
Meteorology's mean daily global solar exposure for Sydney and AEMET's for Madrid — consistent with the annual
totals PVGIS gives for these places (see docs/sandbox.md: sources and how close they are).
They were typed in, not downloaded (the service has no network), so read them as ±5 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SITE_RADIUS_KM = 300.0
EARTH_RADIUS_KM = 6371.0


@dataclass(frozen=True, slots=True)
class ReferenceSite:
    name: str
    latitude: float
    longitude: float
    # Mean daily global horizontal irradiation, kWh/m² per day, January … December.
    ghi_kwh_m2_day: tuple[float, ...]

    @property
    def annual_kwh_m2(self) -> float:
        days = (31, 28.25, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
        return sum(g * d for g, d in zip(self.ghi_kwh_m2_day, days, strict=True))


REFERENCE_SITES: tuple[ReferenceSite, ...] = (
    # KNMI De Bilt (the station next to Utrecht), 1991–2020: ≈ 1,020 kWh/m² a year.
    ReferenceSite(
        "De Bilt, NL (KNMI)",
        52.10,
        5.18,
        (0.61, 1.25, 2.39, 3.97, 4.87, 5.23, 5.06, 4.29, 2.97, 1.68, 0.80, 0.48),
    ),
    # DWD Potsdam (the reference station for Berlin-Brandenburg), 1991–2020: ≈ 1,100 kWh/m².
    ReferenceSite(
        "Potsdam, DE (DWD)",
        52.38,
        13.06,
        (0.68, 1.39, 2.61, 4.27, 5.19, 5.57, 5.32, 4.55, 3.20, 1.81, 0.83, 0.52),
    ),
    # Bureau of Meteorology, Sydney (Observatory Hill / Airport) mean daily global solar
    # exposure, converted from MJ/m² (÷ 3.6): ≈ 1,700 kWh/m² a year; summer is December–February.
    ReferenceSite(
        "Sydney, AU (BoM)",
        -33.94,
        151.17,
        (6.50, 5.67, 4.86, 3.86, 2.94, 2.50, 2.78, 3.67, 4.78, 5.69, 6.17, 6.61),
    ),
    # AEMET Madrid (Ciudad Universitaria / Retiro) mean daily global radiation: ≈ 1,750 kWh/m²
    # a year. Without it central Spain fell back to the latitude climatology, ≈ 25 % too
    # cloudy (a 30° south roof made ≈ 1,210 kWh/kWp; PVGIS gives ≈ 1,550–1,650).
    ReferenceSite(
        "Madrid, ES (AEMET)",
        40.45,
        -3.72,
        (2.20, 3.05, 4.50, 5.55, 6.70, 7.60, 7.80, 6.90, 5.20, 3.60, 2.40, 1.90),
    ),
)


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance (haversine)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


def reference_site(latitude: float, longitude: float) -> ReferenceSite | None:
    """The nearest reference site within `SITE_RADIUS_KM`, or None."""
    best: tuple[float, ReferenceSite] | None = None
    for site in REFERENCE_SITES:
        km = distance_km(latitude, longitude, site.latitude, site.longitude)
        if km <= SITE_RADIUS_KM and (best is None or km < best[0]):
            best = (km, site)
    return None if best is None else best[1]
