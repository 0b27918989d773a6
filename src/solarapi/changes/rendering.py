"""The change feed's two renderings of a page: one JSON object, or NDJSON lines ending in a
line with the cursor. The page comes as columns (`db.LogPage`); each column's values are
written in one vectorised call (orjson for the numbers, numpy for the timestamps) and the
rows joined from them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import orjson

from solarapi.changes.service import ChangePage

NDJSON = "application/x-ndjson"
_CHUNK = 20_000  # rows per piece of a streamed body
_ROW = b'{"system_id":"%s","timestamp":"%s","energy_wh":%s,"power_w":%s}'


def _rows(page: ChangePage, lo: int, hi: int) -> list[bytes]:
    log = page.rows
    if hi <= lo:
        return []
    # `2025-06-15T12:00:00Z`, as bytes, for every row at once.
    stamps = np.datetime_as_string(
        log.starts[lo:hi].astype("datetime64[s]"), unit="s", timezone="UTC"
    ).astype("S20")
    # The numbers as orjson writes them (NaN, a power not reported, as null), one call per
    # column.
    energy = orjson.dumps(log.energy_wh[lo:hi], option=orjson.OPT_SERIALIZE_NUMPY)
    power = orjson.dumps(log.power_w[lo:hi], option=orjson.OPT_SERIALIZE_NUMPY)
    # System ids are ours (`sys_` and base32): no character in them needs escaping in JSON.
    return [
        _ROW % row
        for row in zip(
            log.system_ids[lo:hi],
            stamps.tolist(),
            energy[1:-1].split(b","),
            power[1:-1].split(b","),
            strict=True,
        )
    ]


def _tail(page: ChangePage) -> bytes:
    return orjson.dumps({"next_cursor": page.next_cursor, "has_more": page.has_more})


def render_json(page: ChangePage) -> bytes:
    data = b",".join(_rows(page, 0, len(page.rows.starts)))
    return b'{"data":[' + data + b"]," + _tail(page)[1:]


def render_ndjson(page: ChangePage) -> Iterator[bytes]:
    """The NDJSON body in pieces: rows, one per line, then the cursor line."""
    for lo in range(0, len(page.rows.starts), _CHUNK):
        yield b"\n".join(_rows(page, lo, lo + _CHUNK)) + b"\n"
    yield _tail(page) + b"\n"


def wants_stream(accept: str) -> bool:
    """Whether an `Accept` header asks for NDJSON: an explicit `application/x-ndjson` range
    with a q-value above 0 and at least that of JSON (`application/json`, else
    `application/*`, else `*/*`). A wildcard alone keeps the default, JSON; so does
    `application/x-ndjson;q=0`, which rules the stream out (RFC 9110 §12.5.1). An unreadable
    q-value counts as 1."""
    ndjson: float | None = None
    json_q: dict[str, float] = {}
    for media_range in accept.split(","):
        kind, *parameters = (part.strip() for part in media_range.split(";"))
        kind = kind.lower()
        q = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 1.0
        if kind == NDJSON:
            ndjson = q if ndjson is None else max(ndjson, q)
        elif kind in ("application/json", "application/*", "*/*"):
            json_q[kind] = max(json_q.get(kind, 0.0), q)
    if not ndjson:
        return False
    json = next(
        (json_q[kind] for kind in ("application/json", "application/*", "*/*") if kind in json_q),
        0.0,
    )
    return ndjson >= json
