"""The change feed's two renderings of a page: one JSON object, or NDJSON lines ending in a
line with the cursor. Each column's values are written by orjson in one call and the rows
joined from them (timestamps formatted once per page, in one vectorised call)."""

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
    if not rows:
        return []
    system_ids, starts, energies, powers = zip(*rows, strict=True)
    stamps = iso_strings(np.fromiter(starts, np.int64, len(rows)))
    # The numbers as orjson writes them (None as null), in one call per column.
    energy = orjson.dumps(list(energies))[1:-1].split(b",")
    power = orjson.dumps(list(powers))[1:-1].split(b",")
    # System ids are ours (`sys_` and base32): no character in them needs escaping in JSON.
    return [
        b'{"system_id":"%s","timestamp":"%s","energy_wh":%s,"power_w":%s}'
        % (system_id.encode(), stamp.encode(), e, p)
        for system_id, stamp, e, p in zip(system_ids, stamps, energy, power, strict=True)
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
