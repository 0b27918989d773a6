"""The revised grid over HTTP (issue 28, items 9, 20, 21): sub-daily buckets follow the local
clock in half-hour zones, for readings and market value; no bucket for a day that does not
exist; a declaration for such a day gets a clear message; offsets off the quarter-hour
(Monrovia before 1972) never give a 500. Both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from tests.prices.helpers import import_file, write_csv
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, quarter_series, upload


async def _system(client: httpx.AsyncClient, timezone: str, market_zone: str | None = None) -> str:
    created = await create_system(
        client,
        location={"latitude": 10.0, "longitude": 10.0, "timezone": timezone},
        market_zone=market_zone,
    )
    return str(created["id"])


async def _get(client: httpx.AsyncClient, path: str, **params: str) -> Any:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_kolkata_local_day_in_hours(app: FastAPI, enterprise: Tenant) -> None:
    """One local day at 1h: 24 buckets 00:00–24:00 IST (18:30Z–18:30Z), each the sum of its
    four quarter-hours — not 25 UTC hours from 23:30 IST."""
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Asia/Kolkata")
        start = datetime(2025, 6, 14, 18, 30, tzinfo=UTC)
        items = quarter_series(start - timedelta(hours=1), 104)
        for i, item in enumerate(items):
            item["energy_wh"] = float(i)
        assert (await upload(client, system_id, items)).status_code == 200
        body = await _get(
            client,
            f"/api/v1/systems/{system_id}/readings",
            **{"from": "2025-06-15T00:00:00+05:30", "to": "2025-06-16T00:00:00+05:30"},
            interval="1h",
        )
    data = body["data"]
    assert len(data) == 24
    assert (body["meta"]["from"], body["meta"]["to"]) == (iso(start), iso(start + timedelta(1)))
    assert data[12]["start"] == "2025-06-15T06:30:00Z"  # 12:00–13:00 IST
    for hour, bucket in enumerate(data):
        first = 4 + 4 * hour  # the upload began an hour before the day
        assert bucket["energy_wh"] == sum(range(first, first + 4))
        assert bucket["samples"] == bucket["expected_samples"] == 4


async def test_kathmandu_hours_start_at_quarter_past(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Asia/Kathmandu")
        body = await _get(
            client,
            f"/api/v1/systems/{system_id}/readings",
            **{"from": "2025-06-15T06:00:00Z", "to": "2025-06-15T08:00:00Z"},
            interval="1h",
        )
    assert [b["start"] for b in body["data"]] == [
        "2025-06-15T05:15:00Z",
        "2025-06-15T06:15:00Z",
        "2025-06-15T07:15:00Z",
    ]


async def test_whole_hour_zones_keep_the_utc_grid(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "America/New_York")
        body = await _get(
            client,
            f"/api/v1/systems/{system_id}/readings",
            **{"from": "2025-11-02T04:00:00Z", "to": "2025-11-02T08:00:00Z"},
            interval="1h",
        )
    # The repeated 01:00 (EDT, then EST) is two buckets, as the UTC hours always were.
    assert [b["start"] for b in body["data"]] == [f"2025-11-02T0{h}:00:00Z" for h in range(4, 8)]


async def test_apia_has_no_bucket_for_2011_12_30(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Pacific/Apia")
        body = await _get(
            client,
            f"/api/v1/systems/{system_id}/readings",
            **{"from": "2011-12-29T00:00:00-10:00", "to": "2012-01-01T00:00:00+14:00"},
            interval="1d",
        )
    spans = [(b["start"], b["end"]) for b in body["data"]]
    assert spans == [
        ("2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z"),  # 2011-12-29, then 2011-12-31
        ("2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z"),
    ]
    assert all(b["expected_samples"] == 96 for b in body["data"])


async def test_declaration_for_a_day_that_does_not_exist(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Pacific/Apia")
        response = await client.post(
            "/api/v1/declarations",
            json={
                "system_id": system_id,
                "type": "guarantee_of_origin",
                "period_start": "2011-12-30",
                "period_end": "2011-12-30",
            },
        )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "validation"
    assert "2011-12-30 has no day in the system's time zone Pacific/Apia" in body["error"]


async def test_market_value_follows_the_local_clock(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    """A Kolkata roof valued at NL prices: 1h buckets are IST hours, and each holds the
    value of its own four quarter-hours."""
    start = datetime(2025, 6, 15, 6, 30, tzinfo=UTC)  # 12:00 IST
    prices = [((start + timedelta(minutes=15 * i)).isoformat(), 40.0 + i) for i in range(-8, 16)]
    await import_file(app, write_csv(tmp_path, "nl.csv", prices), "NL")
    async with client_for(app, enterprise.live) as client:
        system_id = await _system(client, "Asia/Kolkata", market_zone="NL")
        assert (
            await upload(client, system_id, quarter_series(start, 8, 1000.0))
        ).status_code == 200
        body = await _get(
            client,
            f"/api/v1/systems/{system_id}/market-value",
            **{"from": "2025-06-15T12:00:00+05:30", "to": "2025-06-15T14:00:00+05:30"},
            interval="1h",
        )
    assert [b["start"] for b in body["data"]] == ["2025-06-15T06:30:00Z", "2025-06-15T07:30:00Z"]
    values = [b["value_eur"] for b in body["data"]]
    assert values == [
        round(sum(1000.0 / 1e6 * (40.0 + i) for i in range(0, 4)), 4),
        round(sum(1000.0 / 1e6 * (40.0 + i) for i in range(4, 8)), 4),
    ]


async def test_offsets_off_the_quarter_hour_never_500(app: FastAPI, enterprise: Tenant) -> None:
    """Africa/Monrovia (−0:44:30 until 1972) and Pacific/Kiritimati (−10:40 until 1979):
    market value was a 500; readings and market value answer, on the quarter-hour grid."""
    async with client_for(app, enterprise.live) as client:
        for timezone, day in (
            ("Africa/Monrovia", "1971-06-01"),
            ("Pacific/Kiritimati", "1978-06-01"),
        ):
            system_id = await _system(client, timezone, market_zone="NL")
            for interval in ("15m", "1h", "1d", "1M"):
                params = {
                    "from": f"{day}T00:00:00Z",
                    "to": f"{day}T06:00:00Z",
                    "interval": interval,
                }
                for path in ("readings", "market-value"):
                    response = await client.get(
                        f"/api/v1/systems/{system_id}/{path}", params=params
                    )
                    assert response.status_code == 200, (timezone, interval, path, response.text)
                    edges = [b["start"] for b in response.json()["data"]]
                    assert all(edge[14:16] in ("00", "15", "30", "45") for edge in edges)
                    assert all(edge.endswith(":00Z") for edge in edges)
