"""Plain factory functions for systems and readings over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx


def system_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Rooftop Haarlem",
        "capacity_kwp": 8.4,
        "inverter_capacity_kw": 7.0,
        "location": {
            "latitude": 52.38,
            "longitude": 4.64,
            "timezone": "Europe/Amsterdam",
            "country": "NL",
        },
        "market_zone": "NL",
    }
    body.update(overrides)
    return body


async def create_system(client: httpx.AsyncClient, **overrides: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/systems", json=system_body(**overrides))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quarter_series(
    start: datetime, count: int, energy_wh: float = 100.0, power_w: float | None = None
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(count):
        item: dict[str, Any] = {
            "timestamp": iso(start + timedelta(minutes=15 * i)),
            "energy_wh": energy_wh,
        }
        if power_w is not None:
            item["power_w"] = power_w
        items.append(item)
    return items


async def upload(
    client: httpx.AsyncClient, system_id: str, readings: list[dict[str, Any]]
) -> httpx.Response:
    return await client.post(f"/api/v1/systems/{system_id}/readings", json={"readings": readings})
