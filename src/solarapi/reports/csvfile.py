"""CSV files: RFC 4180 (comma, CRLF, quotes only where needed, doubled inside), UTF-8, one
header row whose column names carry the units."""

from __future__ import annotations

import csv
from pathlib import Path

from solarapi.reports.document import Cell, ReportContent

# A text cell starting with one of these is run as a formula by spreadsheet programs (CSV
# injection); such cells get a leading apostrophe, which spreadsheets show as plain text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Cell) -> str | int | float:
    if value is None:
        return ""  # missing data is an empty field, never 0
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA_START) else value
    return value


def write_csv(content: ReportContent, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        writer.writerow(content.csv_columns)
        writer.writerows([_cell(value) for value in row] for row in content.csv_rows)
