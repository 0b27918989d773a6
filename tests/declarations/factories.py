"""Plain factory functions for the declarations tests: systems, readings, declarations."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
from fastapi import FastAPI

from solarapi.declarations.service import decide_as_operator
from solarapi.kit.timefmt import utcnow

QUARTER = timedelta(minutes=15)
# Days long past in every zone: declarations must end before today.
MAY_1 = date(2025, 5, 1)


async def make_system(
    client: httpx.AsyncClient,
    timezone: str = "Europe/Amsterdam",
    capacity_kwp: float = 500.0,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"Declarations test {timezone}",
        "capacity_kwp": capacity_kwp,
        "location": {"latitude": 52.38, "longitude": 4.64, "timezone": timezone},
        **extra,
    }
    response = await client.post("/api/v1/systems", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def local_day_start(day: date, timezone: str) -> datetime:
    """00:00 of `day` in `timezone`, in UTC (computed here independently of the server)."""
    return datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(timezone)).astimezone(UTC)


def quarter_starts(start: datetime, end: datetime) -> list[datetime]:
    out: list[datetime] = []
    at = start
    while at < end:
        out.append(at)
        at += QUARTER
    return out


def energy_for(index: int) -> float:
    """A distinct, non-round value per quarter-hour (so a sum over a wrong range shows)."""
    return 1000.0 + (index % 97) * 17.25 + (index % 5) * 0.125


async def upload(client: httpx.AsyncClient, system_id: str, values: dict[datetime, float]) -> None:
    items = [
        {"timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "energy_wh": energy}
        for at, energy in sorted(values.items())
    ]
    for first in range(0, len(items), 10_000):
        response = await client.post(
            f"/api/v1/systems/{system_id}/readings",
            json={"readings": items[first : first + 10_000]},
        )
        assert response.status_code == 200, response.text


async def upload_days(
    client: httpx.AsyncClient,
    system: dict[str, Any],
    first: date,
    last: date,
    *,
    scale: float = 1.0,
    skip: int = 0,
) -> dict[datetime, float]:
    """Readings for every quarter-hour of the local days first..last (minus the last `skip`
    quarter-hours); returns what was uploaded."""
    tz = system["location"]["timezone"]
    starts = quarter_starts(
        local_day_start(first, tz), local_day_start(last + timedelta(days=1), tz)
    )
    if skip:
        starts = starts[:-skip]
    values = {at: round(energy_for(i) * scale, 3) for i, at in enumerate(starts)}
    await upload(client, system["id"], values)
    return values


async def create_declaration(
    client: httpx.AsyncClient, system_id: str, **fields: Any
) -> httpx.Response:
    body: dict[str, Any] = {
        "system_id": system_id,
        "type": "guarantee_of_origin",
        "period_start": "2025-05-01",
        "period_end": "2025-05-02",
        **fields,
    }
    return await client.post("/api/v1/declarations", json=body)


async def operator_decides(
    app: FastAPI, declaration_id: str, *, approve: bool, reason: str | None = None
) -> dict[str, Any]:
    """What `solarapi declarations decide` does, in process."""
    async with app.state.sessionmaker() as session, session.begin():
        declaration = await decide_as_operator(
            session, declaration_id, approve=approve, reason=reason, now=utcnow()
        )
        return declaration.render()
