"""Readings in CSV (`timestamp,energy_wh[,power_w]`), the format of `solarapi readings
import` and of the dashboard's upload: one parser and one mapping of the upload's errors to
the file's lines, for both."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TextIO

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ApiError
from solarapi.kit.grid import IntArray
from solarapi.kit.timefmt import format_timestamp
from solarapi.models.systems import System
from solarapi.readings.upload import (
    ReadingBatch,
    ReadingRejected,
    UploadResult,
    check_starts,
    upload_readings,
)

BATCH = 10_000
HEADERS = (["timestamp", "energy_wh"], ["timestamp", "energy_wh", "power_w"])


class CsvRowError(Exception):
    """A row of the file is unusable; the message names its line."""


_DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+")
# A number as a JSON body writes it (a point for decimals, an optional exponent), spaces
# around allowed: not the rest of what Python's `float` reads (`1_000`, `nan`, `inf`).
_DECIMAL = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")


def _number(cell: str, column: str, line: int) -> float:
    try:
        if not _DECIMAL.fullmatch(cell):
            raise ValueError(cell)
        return float(cell)
    except ValueError:
        hint = (
            f" (write decimals with a point: {cell.replace(',', '.')})"
            if _DECIMAL_COMMA.fullmatch(cell)
            else ""
        )
        raise CsvRowError(f"line {line}: {column}: '{cell[:40]}' is not a number{hint}") from None


def _header_problem(header: list[str] | None) -> str:
    """What is wrong with a header line that is not one of `HEADERS`, with the usual causes
    of a spreadsheet's or an inverter's export spelled out."""
    problem = "line 1: the header must be 'timestamp,energy_wh' or 'timestamp,energy_wh,power_w'"
    cells = [cell.strip().lower() for cell in header or []]
    if len(cells) == 1 and ";" in cells[0]:
        return f"{problem}; this file's columns are separated by ';': save it with commas"
    if any("kwh" in cell for cell in cells):
        return f"{problem}; energy is in Wh: multiply a kWh column by 1000 and name it energy_wh"
    return problem


def read_batches(
    stream: TextIO, on_bytes: Callable[[int], None] | None = None
) -> Iterator[tuple[list[int], ReadingBatch]]:
    """Batches of (line numbers, readings) from a CSV with header
    `timestamp,energy_wh[,power_w]`; a malformed row raises CsvRowError naming its line."""

    def counted() -> Iterator[str]:
        try:
            for text in stream:
                if on_bytes is not None:
                    on_bytes(len(text.encode()))
                yield text
        except UnicodeDecodeError:
            raise CsvRowError("the file is not UTF-8 text; save it as CSV in UTF-8") from None

    reader = csv.reader(counted())
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise CsvRowError(f"line 1: {exc}") from None
    if header is None or [cell.strip().lower() for cell in header] not in HEADERS:
        raise CsvRowError(_header_problem(header))
    width = len(header)
    lines: list[int] = []
    items = ReadingBatch()
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise CsvRowError(f"line {reader.line_num}: {exc}") from None
        if row is None:
            break
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != width:
            raise CsvRowError(f"line {line}: expected {width} columns, got {len(row)}")
        power_cell = row[2].strip() if width == 3 else ""
        items.add(
            row[0].strip(),
            _number(row[1].strip(), "energy_wh", line),
            _number(power_cell, "power_w", line) if power_cell else None,
        )
        lines.append(line)
        if len(items) == BATCH:
            yield lines, items
            lines, items = [], ReadingBatch()
    if items:
        yield lines, items


class FileQuarters:
    """The quarter-hours a file's stored batches gave, with their lines: a file stored as a
    whole (the dashboard's) refuses a quarter-hour given twice wherever the two rows are, not
    only within one batch of the parser."""

    def __init__(self) -> None:
        self._starts: list[IntArray] = []
        self._lines: list[IntArray] = []

    def starts(self) -> IntArray:
        return np.concatenate(self._starts) if self._starts else np.zeros(0, dtype=np.int64)

    def add(self, lines: list[int], batch: ReadingBatch, now: datetime) -> None:
        self._starts.append(check_starts(batch.timestamps, now).starts)
        self._lines.append(np.array(lines, dtype=np.int64))

    def line_of(self, start: int) -> int:
        where = np.flatnonzero(self.starts() == start)
        return int(np.concatenate(self._lines)[where[0]])


def _repeat_message(
    exc: ReadingRejected, lines: list[int], earlier: FileQuarters | None
) -> str | None:
    """`line 9: timestamp: 2026-06-15T10:00:00Z repeats line 4; …` for a quarter-hour the
    file gives twice (the API's message names the batch's items, which a file has not)."""
    if exc.repeated_start is None:
        return None
    if exc.repeats is not None:
        first = lines[exc.repeats]
    elif earlier is not None:
        first = earlier.line_of(exc.repeated_start)
    else:
        return None
    moment = format_timestamp(datetime.fromtimestamp(exc.repeated_start, UTC))
    return (
        f"line {lines[exc.index]}: timestamp: {moment} repeats line {first}; each quarter-hour "
        "may appear once per file"
    )


async def store_batch(
    session: AsyncSession,
    system: System,
    lines: list[int],
    batch: ReadingBatch,
    now: datetime,
    earlier: FileQuarters | None = None,
) -> UploadResult:
    """One batch through the API's validation and upsert (`upload_readings`), its errors
    named by the file's line: `line 7: energy_wh: must be ≥ 0; got -1.0`. With `earlier`
    (the file's stored batches) a quarter-hour of those is refused too, and this batch's are
    added to it once stored."""
    try:
        result = await upload_readings(
            session, system, batch, now, earlier=None if earlier is None else earlier.starts()
        )
    except ReadingRejected as exc:
        message = _repeat_message(exc, lines, earlier)
        raise CsvRowError(
            message or f"line {lines[exc.index]}: {exc.field}: {exc.problem}"
        ) from None
    except ApiError as exc:
        raise CsvRowError(exc.message) from None
    if earlier is not None:
        earlier.add(lines, batch, now)
    return result


async def store_file(
    session: AsyncSession, system: System, stream: TextIO, now: datetime
) -> UploadResult:
    """Every row of the file in the caller's transaction; on CsvRowError the caller rolls
    back, so the file is stored all or nothing. The result spans the whole file."""
    received = inserted = updated = 0
    start: datetime | None = None
    end: datetime | None = None
    earlier = FileQuarters()
    for lines, batch in read_batches(stream):
        result = await store_batch(session, system, lines, batch, now, earlier)
        received += result.received
        inserted += result.inserted
        updated += result.updated
        if result.start is not None and result.end is not None:
            start = result.start if start is None else min(start, result.start)
            end = result.end if end is None else max(end, result.end)
    if start is None or end is None:
        raise CsvRowError("the file holds no readings below its header line")
    return UploadResult(received, inserted, updated, start, end)
