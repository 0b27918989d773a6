"""The portfolio bodies, rendered once: the systems' parts by the per-system endpoint's own
rendering (`readings.rendering.render_many`), the envelope around them here."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import orjson

from solarapi.kit.grid import iso_strings
from solarapi.kit.pagination import PageParams
from solarapi.kit.timefmt import format_timestamp
from solarapi.portfolio.fleet import Fleet
from solarapi.portfolio.service import FleetReadings, FleetSummary, FleetValue, SystemValue
from solarapi.prices.market_value import ValueTotals, bucket_items, edge_labels
from solarapi.readings.rendering import render_many


def pagination(fleet: Fleet[Any]) -> dict[str, Any]:
    params: PageParams = fleet.page
    total = len(fleet.systems)
    total_pages = (total + params.limit - 1) // params.limit if total else 0
    return {
        "page": params.page,
        "limit": params.limit,
        "total": total,
        "total_pages": total_pages,
        "has_more": params.page < total_pages,
    }


def _envelope(items: list[bytes], meta: dict[str, Any], fleet: Fleet[Any]) -> bytes:
    return _joined_envelope(_commas(items), meta, fleet)


def _commas(items: list[bytes]) -> list[bytes]:
    pieces = [b","] * (2 * len(items) - 1) if items else []
    pieces[0::2] = items
    return pieces


def _joined_envelope(pieces: list[bytes], meta: dict[str, Any], fleet: Fleet[Any]) -> bytes:
    """The body around `data`'s pieces (already comma-separated), joined once."""
    return b"".join([_HEAD, *pieces, _tail(meta, fleet)])


_HEAD = b'{"data":['


def _tail(meta: dict[str, Any], fleet: Fleet[Any]) -> bytes:
    """The body after `data`'s items."""
    return (
        b'],"meta":'
        + orjson.dumps(meta)
        + b',"pagination":'
        + orjson.dumps(pagination(fleet))
        + b"}"
    )


def render_readings(result: FleetReadings) -> bytes:
    totals = result.totals
    meta = {
        "interval": result.interval.value,
        "from": format_timestamp(result.start),
        "to": format_timestamp(result.end),
        "totals": {
            "energy_wh": totals.energy_wh,
            "samples": totals.samples,
            "expected_samples": totals.expected_samples,
            "systems": totals.systems,
            "systems_with_data": totals.systems_with_data,
        },
    }
    page = result.fleet.page
    lo = min(page.offset, len(result.fleet.systems))
    hi = min(page.offset + page.limit, len(result.fleet.systems))
    # The envelope around the items written with them (not joined to them: a copy of the
    # body's megabytes less).
    around = (_HEAD, _tail(meta, result.fleet))
    return b"".join(render_many(result.readings, result.system_totals, lo, hi, around))


def render_summary(result: FleetSummary) -> bytes:
    items = [
        orjson.dumps({"system_id": system_id, **summary.to_api()})
        for system_id, summary in result.items
    ]
    return _envelope(items, {"totals": result.totals.to_api()}, result.fleet)


_NO_VALUE: dict[str, None] = dict.fromkeys(field.name for field in fields(ValueTotals))


def _value_item(item: SystemValue) -> bytes:
    """A system's part of `data`: its `/systems/{id}/market-value` series and totals, or
    null values and no buckets without a market zone."""
    value = item.value
    if value is None:
        edges = iso_strings(np.array([item.edges[0], item.edges[-1]]))
        return orjson.dumps(
            {
                "system_id": item.system_id,
                "market_zone": item.market_zone,
                "timezone": item.timezone,
                "from": edges[0],
                "to": edges[1],
                "currency": None,
                "source": None,
                "data": [],
                "totals": _NO_VALUE,
            }
        )
    first, last = edge_labels(value.valued)
    return orjson.dumps(
        {
            "system_id": item.system_id,
            "market_zone": value.market_zone,
            "timezone": value.timezone,
            "from": first,
            "to": last,
            "currency": value.currency,
            "source": value.source,
            "data": bucket_items(value.valued),
            "totals": value.totals.to_api(),
        }
    )


def render_market_value(result: FleetValue) -> bytes:
    meta = {
        "interval": result.interval.value,
        "from": format_timestamp(result.start),
        "to": format_timestamp(result.end),
        "currency": "EUR",
        "zones": [{"zone": code, **totals.to_api()} for code, totals in result.zones],
        "totals": result.totals.to_api(),
    }
    return _envelope([_value_item(item) for item in result.items], meta, result.fleet)
