"""The change feed's two renderings of a page: one JSON object, or NDJSON lines ending in a
line with the cursor. Each row is written by orjson from a tuple of its values (timestamps
formatted once per page, in one vectorised call)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import orjson

from solarapi.changes.service import ChangePage
from solarapi.kit.grid import iso_strings

NDJSON = "application/x-ndjson"
_CHUNK = 5_000  # rows per piece of a streamed body


def _rows(page: ChangePage, lo: int, hi: int) -> list[bytes]:
    rows = page.rows[lo:hi]
    stamps = iso_strings(np.fromiter((row[1] for row in rows), np.int64, len(rows)))
    return [
        orjson.dumps(
            {"system_id": row[0], "timestamp": stamp, "energy_wh": row[2], "power_w": row[3]}
        )
        for row, stamp in zip(rows, stamps, strict=True)
    ]


def _tail(page: ChangePage) -> bytes:
    return orjson.dumps({"next_cursor": page.next_cursor, "has_more": page.has_more})


def render_json(page: ChangePage) -> bytes:
    data = b",".join(_rows(page, 0, len(page.rows)))
    return b'{"data":[' + data + b"]," + _tail(page)[1:]


def render_ndjson(page: ChangePage) -> Iterator[bytes]:
    """The NDJSON body in pieces: rows, one per line, then the cursor line."""
    for lo in range(0, len(page.rows), _CHUNK):
        yield b"\n".join(_rows(page, lo, lo + _CHUNK)) + b"\n"
    yield _tail(page) + b"\n"
