"""The types every price file reader, the store and the cache share: a validated row, a parsed
file, and the error that names what is wrong with a file."""

from __future__ import annotations

import math
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


# The plausible day-ahead price, €/MWh. SDAC's harmonised clearing limits are −500 and
# +4,000 (the maximum rises automatically after prices near it), so this leaves room for
# those rises while refusing what no auction produces: ±1.7e308 was imported, then served
# as null and made every total NaN.
MIN_PRICE_EUR_PER_MWH = -1_000.0
MAX_PRICE_EUR_PER_MWH = 10_000.0


def price_problem(text: str) -> str | None:
    """Why `text` is not a plausible price, or None."""
    try:
        price = float(text)
    except ValueError:
        return "is not a number"
    if not math.isfinite(price):
        return "is not a number"
    if not MIN_PRICE_EUR_PER_MWH <= price <= MAX_PRICE_EUR_PER_MWH:
        return (
            f"is outside the plausible range {MIN_PRICE_EUR_PER_MWH:,.0f} to "
            f"{MAX_PRICE_EUR_PER_MWH:,.0f} €/MWh (SDAC's harmonised limits are −500 and "
            "+4,000)"
        )
    return None


@dataclass(frozen=True, slots=True)
class PriceRow:
    start: int  # epoch seconds, UTC
    resolution_s: int
    price_eur_per_mwh: float

    @property
    def end(self) -> int:
        return self.start + self.resolution_s


@dataclass(frozen=True, slots=True)
class PriceSequence:
    """One classification sequence of an ENTSO-E document (another auction's prices)."""

    sequence: int
    rows: list[PriceRow]  # sorted by start, never overlapping


@dataclass(frozen=True, slots=True)
class ResolutionSpan:
    """What a set of rows holds at one resolution: how many, from the first start to the last end."""

    resolution_s: int
    count: int
    first_start: int
    last_end: int


def resolution_spans(rows: list[PriceRow]) -> list[ResolutionSpan]:
    """Per resolution (coarsest first), the count and range of `rows`."""
    spans: list[ResolutionSpan] = []
    for resolution_s in sorted({row.resolution_s for row in rows}, reverse=True):
        same = [row for row in rows if row.resolution_s == resolution_s]
        spans.append(
            ResolutionSpan(
                resolution_s,
                len(same),
                min(row.start for row in same),
                max(row.end for row in same),
            )
        )
    return spans


@dataclass(frozen=True, slots=True)
class ParsedPrices:
    zone: Zone
    source: PriceSource
    rows: list[PriceRow]  # sorted by start, never overlapping
    # ENTSO-E only: the classification sequence imported (1, or None when the document has no
    # sequences) and the other sequences, which are never imported.
    sequence: int | None = None
    skipped: tuple[PriceSequence, ...] = ()
