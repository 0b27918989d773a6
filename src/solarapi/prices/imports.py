"""Reading price files (ENTSO-E XML or CSV) into validated rows, before anything is stored.

Parsing is complete before the database is touched, so a bad file stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from solarapi.prices.zones import ZONES, Zone

PriceSource = Literal["entsoe", "csv", "simulated"]

# Every published resolution; all are whole multiples of the 15-minute grid.
RESOLUTIONS_S: frozenset[int] = frozenset({900, 1800, 3600})
QUARTER_S = 900
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


def read_price_file(path: Path, zone_code: str, resolution_s: int | None = None) -> ParsedPrices:
    """Parse `path` (XML when it starts with `<`, else CSV) for `zone_code`."""
    from solarapi.prices.csvfile import parse_price_csv
    from solarapi.prices.entsoe import parse_entsoe_xml

    zone = ZONES.get(zone_code)
    if zone is None:
        known = ", ".join(ZONES)
        raise PriceFileError(f"unknown zone '{zone_code}'; known zones: {known}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise PriceFileError(f"cannot read {path}: {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise PriceFileError(f"{path} is {size} bytes; price files are limited to 64 MiB")
    data = path.read_bytes()
    if not data.strip():
        raise PriceFileError(f"{path} is empty")
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        document = parse_entsoe_xml(data)
        if document.zone.code != zone.code:
            raise PriceFileError(
                f"the document is for zone {document.zone.code} ({document.zone.eic}), "
                f"not {zone.code} ({zone.eic}) as --zone says"
            )
        return ParsedPrices(zone, "entsoe", document.rows, document.sequence, document.skipped)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PriceFileError(f"{path} is neither XML nor UTF-8 CSV: {exc.reason}") from None
    return ParsedPrices(zone, "csv", parse_price_csv(text, resolution_s))
