"""Reading price files (ENTSO-E XML or CSV) into validated rows, before anything is stored.

Parsing is complete before the database is touched, so a bad file stores nothing.
"""

from __future__ import annotations

from pathlib import Path

from solarapi.kit.zones import ZONES
from solarapi.prices.csvfile import parse_price_csv
from solarapi.prices.entsoe import parse_entsoe_xml
from solarapi.prices.price_rows import MAX_FILE_BYTES, ParsedPrices, PriceFileError


def read_price_file(path: Path, zone_code: str, resolution_s: int | None = None) -> ParsedPrices:
    """Parse `path` (XML when it starts with `<`, else CSV) for `zone_code`."""
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
