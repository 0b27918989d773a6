"""CSV price files: a header `timestamp,price_eur_per_mwh`, then one row per price period.

`timestamp` is the period's start in RFC 3339 with a zone. A CSV does not say how long a
price holds, so unless the operator gives `--resolution`, each row's period runs to the
next row when that is 15, 30 or 60 minutes later, and otherwise (the last row, or before a
gap) is as long as the row before it. That reads a mixed 60/15-minute history correctly;
a file with a single row needs `--resolution`.
"""

from __future__ import annotations

import csv
import io
import itertools

from solarapi.kit.grid import QUARTER_S
from solarapi.kit.timefmt import TimestampError, parse_timestamp
from solarapi.prices.price_rows import RESOLUTIONS_S, PriceFileError, PriceRow, price_problem

HEADER = ["timestamp", "price_eur_per_mwh"]


def parse_price_csv(text: str, resolution_s: int | None = None) -> list[PriceRow]:
    reader = csv.reader(io.StringIO(text))
    starts: list[tuple[int, float, int]] = []  # (start, price, line)
    header_seen = False
    for record in reader:
        line = reader.line_num
        if not record or all(not cell.strip() for cell in record):
            continue
        cells = [cell.strip() for cell in record]
        if not header_seen:
            if [c.lower() for c in cells] != HEADER:
                raise PriceFileError(
                    f"line {line}: the header must be 'timestamp,price_eur_per_mwh'; "
                    f"got {','.join(cells)!r}"
                )
            header_seen = True
            continue
        if len(cells) != 2:
            raise PriceFileError(f"line {line}: expected 2 columns, got {len(cells)}")
        try:
            moment = parse_timestamp(cells[0])
        except TimestampError as exc:
            raise PriceFileError(f"line {line}: timestamp {exc}") from None
        start = int(moment.timestamp())
        if moment.microsecond or start % QUARTER_S:
            raise PriceFileError(
                f"line {line}: timestamp {cells[0]!r} is not on the 15-minute grid "
                "(minute 0, 15, 30 or 45, second 0)"
            )
        problem = price_problem(cells[1])
        if problem is not None:
            raise PriceFileError(f"line {line}: price_eur_per_mwh {cells[1]!r} {problem}")
        starts.append((start, float(cells[1]), line))
    if not header_seen:
        raise PriceFileError("the file is empty; expected a header 'timestamp,price_eur_per_mwh'")
    if not starts:
        raise PriceFileError("the file has a header but no prices")
    # By time, then by line: a repeated timestamp is named on its later line (sorting by
    # price second named the earlier line as the repeat when the later one was cheaper).
    starts.sort(key=lambda item: (item[0], item[2]))
    for (a, _, line_a), (b, _, line_b) in itertools.pairwise(starts):
        if a == b:
            raise PriceFileError(f"line {line_b}: timestamp repeats the one on line {line_a}")

    rows: list[PriceRow] = []
    previous: int | None = resolution_s
    for index, (start, price, line) in enumerate(starts):
        duration = resolution_s
        if duration is None:
            gap = starts[index + 1][0] - start if index + 1 < len(starts) else None
            duration = gap if gap in RESOLUTIONS_S else previous
        if duration is None:
            raise PriceFileError(
                f"line {line}: cannot tell how long this price holds (no next row 15, 30 or 60 "
                "minutes later); pass --resolution 15m, 30m or 60m"
            )
        if start % duration:
            raise PriceFileError(
                f"line {line}: a {duration // 60}-minute price must start on the "
                f"{duration // 60}-minute grid"
            )
        if rows and start < rows[-1].end:
            raise PriceFileError(
                f"line {line}: starts before the {rows[-1].resolution_s // 60}-minute price of "
                "the row before it ends"
            )
        rows.append(PriceRow(start, duration, price))
        previous = duration
    return rows
