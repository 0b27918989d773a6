"""`GET /portfolio/market-value`: each system as `/systems/{id}/market-value` answers it, and
the trader's totals per zone and over all zones; both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.prices.helpers import import_file, write_csv
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload

DAY = datetime(2019, 2, 5, tzinfo=UTC) - timedelta(hours=1)  # 2019-02-05 00:00 in CET
WINDOW = {"from": "2019-02-05T00:00:00+01:00", "to": "2019-02-07T00:00:00+01:00"}


def _price(i: int) -> float:
    return round(40.0 + 30.0 * ((i % 96) / 96.0) - (80.0 if 44 <= i % 96 < 52 else 0.0), 2)


async def _get(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/api/v1{path}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def fleet(app: FastAPI, enterprise: Tenant, tmp_path: Path) -> list[str]:
    for zone, shift in (("PL", 0.0), ("FI", 7.5)):
        rows = [
            ((DAY + timedelta(minutes=15 * i)).isoformat(), _price(i) + shift)
            for i in range(2 * 96)
        ]
        await import_file(app, write_csv(tmp_path, f"{zone}.csv", rows), zone)
    async with client_for(app, enterprise.live) as client:
        ids = []
        for zone, timezone in (("PL", "Europe/Warsaw"), ("PL", "Europe/Warsaw"),
                               ("FI", "Europe/Helsinki"), (None, "Europe/Berlin")):  # fmt: skip
            body: dict[str, Any] = {
                "location": {"latitude": 52.0, "longitude": 20.0, "timezone": timezone},
                "market_zone": zone,
            }
            system_id = (await create_system(client, **body))["id"]
            ids.append(system_id)
            await upload(
                client,
                system_id,
                quarter_series(DAY + timedelta(hours=8 + len(ids)), 36, 200.0 + len(ids)),
            )
    return ids


@pytest.mark.parametrize("interval", ["1h", "1d", "1M"])
async def test_each_system_as_its_endpoint_and_zone_totals(
    app: FastAPI, enterprise: Tenant, fleet: list[str], interval: str
) -> None:
    params = {**WINDOW, "interval": interval}
    async with client_for(app, enterprise.live) as client:
        body = await _get(client, "/portfolio/market-value", **params)
        singles = [
            await _get(client, f"/systems/{system_id}/market-value", **params)
            for system_id in fleet[:3]
        ]
        prices = {
            zone: await _get(client, "/market-prices", zone=zone, interval="1d", **WINDOW)
            for zone in ("PL", "FI")
        }
        only_pl = await _get(client, "/portfolio/market-value", market_zone="PL", **params)
    assert [item["system_id"] for item in body["data"]] == fleet
    for item, single in zip(body["data"], singles, strict=False):
        assert item["data"] == single["data"]
        assert item["totals"] == single["meta"]["totals"]
        assert item["market_zone"] == single["meta"]["market_zone"]
        assert (item["from"], item["to"]) == (single["meta"]["from"], single["meta"]["to"])
    zoneless = body["data"][3]
    assert zoneless["market_zone"] is None
    assert zoneless["data"] == []
    assert set(zoneless["totals"].values()) == {None}

    zones = {zone["zone"]: zone for zone in body["meta"]["zones"]}
    assert set(zones) == {"PL", "FI"}
    for code, members in (("PL", singles[:2]), ("FI", singles[2:3])):
        zone = zones[code]
        totals = [single["meta"]["totals"] for single in members]
        assert zone["systems"] == len(members)
        assert zone["energy_wh"] == pytest.approx(sum(t["energy_wh"] for t in totals))
        assert zone["value_eur"] == pytest.approx(sum(t["value_eur"] for t in totals), abs=1e-3)
        assert zone["capture_price_eur_per_mwh"] == pytest.approx(
            zone["value_eur"] / zone["priced_energy_wh"] * 1e6, abs=1e-2
        )
        # The zone's baseload is /market-prices' mean over the same (local-day) range.
        baseload = prices[code]["meta"]["totals"]["mean_price_eur_per_mwh"]
        if interval != "1M":
            assert zone["baseload_price_eur_per_mwh"] == baseload
            assert all(t["baseload_price_eur_per_mwh"] == baseload for t in totals)
        assert zone["capture_rate"] == pytest.approx(
            zone["capture_price_eur_per_mwh"] / zone["baseload_price_eur_per_mwh"], abs=1e-3
        )
        assert zone["negative_price_energy_wh"] == pytest.approx(
            sum(t["negative_price_energy_wh"] for t in totals)
        )
        assert zone["negative_price_value_eur"] < 0
    everything = body["meta"]["totals"]
    assert everything["systems"] == 3
    assert everything["energy_wh"] == pytest.approx(
        zones["PL"]["energy_wh"] + zones["FI"]["energy_wh"]
    )
    # Two zones: no one baseload price.
    assert everything["baseload_price_eur_per_mwh"] is None
    assert everything["capture_rate"] is None
    # One zone: the totals are that zone's.
    [pl] = only_pl["meta"]["zones"]
    assert {k: v for k, v in pl.items() if k != "zone"} == only_pl["meta"]["totals"]
    assert pl == zones["PL"]


async def test_paging_and_sandbox(app: FastAPI, enterprise: Tenant, fleet: list[str]) -> None:
    async with client_for(app, enterprise.live) as client:
        page = await _get(client, "/portfolio/market-value", limit=2, page=2, **WINDOW)
        everything = await _get(client, "/portfolio/market-value", **WINDOW)
    assert [item["system_id"] for item in page["data"]] == fleet[2:]
    assert page["meta"]["totals"] == everything["meta"]["totals"]
    async with client_for(app, enterprise.test) as sandbox:
        now = datetime.now(UTC)
        window = {"from": (now - timedelta(days=2)).strftime("%Y-%m-%dT00:00:00Z"),
                  "to": (now - timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z")}  # fmt: skip
        body = await _get(sandbox, "/portfolio/market-value", **window)
    assert body["meta"]["totals"]["systems"] == 2  # NL and DE-LU; Sydney has no zone
    assert len(body["data"]) == 3


async def test_systems_without_a_zone_take_none_of_the_page_cap(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A system without a market zone is listed with `data: []`: it has no buckets, so a page
    of one valued system and 35 without a zone (36 × 2,880 quarter-hours if they counted) is
    answered; 36 valued systems are refused, naming the limit that fits."""
    month = {"interval": "15m", "from": "2025-01-01T00:00:00Z", "to": "2025-01-31T00:00:00Z"}
    async with client_for(app, enterprise.live) as client:
        valued = (await create_system(client, name="valued"))["id"]
        for i in range(35):
            await create_system(client, name=f"no zone {i}", market_zone=None)
        page = await client.get("/api/v1/portfolio/market-value", params={**month, "limit": 36})
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["data"]) == 36
        assert [len(item["data"]) for item in body["data"]].count(2880) == 1
        assert [item["system_id"] for item in body["data"] if item["data"]] == [valued]
        # The readings of the same page have buckets for every system: over the cap.
        readings = await client.get("/api/v1/portfolio/readings", params={**month, "limit": 36})
        assert readings.status_code == 400
        assert "largest limit that fits this range and interval is 34" in readings.json()["error"]
        for i in range(35):
            await create_system(client, name=f"valued {i}")
        zoned = await client.get(
            "/api/v1/portfolio/market-value", params={**month, "market_zone": "NL", "limit": 36}
        )
        assert zoned.status_code == 400
        assert "largest limit that fits this range and interval is 34" in zoned.json()["error"]
