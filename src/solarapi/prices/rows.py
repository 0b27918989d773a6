"""The types every price file reader, the store and the cache share: a validated row, a parsed
file, and the error that names what is wrong with a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from solarapi.kit.zones import Zone

PriceSource = Literal["entsoe", "csv", "simulated"]

# Every published resolution; all are whole multiples of the 15-minute grid.
RESOLUTIONS_S: frozenset[int] = frozenset({900, 1800, 3600})
# A year of 15-minute prices as XML is a few MB; anything far larger is not a price file.
MAX_FILE_BYTES = 64 * 1024 * 1024


class PriceFileError(ValueError):
    """A price file that cannot be imported; the message names the line or element."""


@dataclass(frozen=True, slots=True)
class PriceRow:
    start: int  # epoch seconds, UTC
    resolution_s: int
    price_eur_per_mwh: float

    @property
    def end(self) -> int:
        return self.start + self.resolution_s


@dataclass(frozen=True, slots=True)
class ParsedPrices:
    zone: Zone
    source: PriceSource
    rows: list[PriceRow]  # sorted by start, never overlapping
