"""Day-ahead bidding zones: the one table of zone data (code, name, EIC, time zone, currency)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Zone:
    code: str
    name: str
    eic: str
    timezone: str
    currency: str = "EUR"


ZONES: dict[str, Zone] = {
    zone.code: zone
    for zone in (
        Zone("NL", "Netherlands", "10YNL----------L", "Europe/Amsterdam"),
        Zone("BE", "Belgium", "10YBE----------2", "Europe/Brussels"),
        Zone("DE-LU", "Germany and Luxembourg", "10Y1001A1001A82H", "Europe/Berlin"),
        Zone("FR", "France", "10YFR-RTE------C", "Europe/Paris"),
        Zone("AT", "Austria", "10YAT-APG------L", "Europe/Vienna"),
        Zone("CH", "Switzerland", "10YCH-SWISSGRIDZ", "Europe/Zurich"),
        Zone("DK1", "Denmark West", "10YDK-1--------W", "Europe/Copenhagen"),
        Zone("DK2", "Denmark East", "10YDK-2--------M", "Europe/Copenhagen"),
        Zone("ES", "Spain", "10YES-REE------0", "Europe/Madrid"),
        Zone("PL", "Poland", "10YPL-AREA-----S", "Europe/Warsaw"),
        Zone("SE3", "Sweden 3 (Stockholm)", "10Y1001A1001A46L", "Europe/Stockholm"),
        Zone("SE4", "Sweden 4 (Malmö)", "10Y1001A1001A47J", "Europe/Stockholm"),
        Zone("NO1", "Norway 1 (Oslo)", "10YNO-1--------2", "Europe/Oslo"),
        Zone("FI", "Finland", "10YFI-1--------U", "Europe/Helsinki"),
        Zone("IT-NORD", "Italy North", "10Y1001A1001A73I", "Europe/Rome"),
    )
}

ZONE_BY_EIC: dict[str, Zone] = {zone.eic: zone for zone in ZONES.values()}
