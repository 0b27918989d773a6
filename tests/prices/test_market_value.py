"""`GET /systems/{id}/market-value`: production valued at 15 minutes, checked against an
independent computation from the uploaded readings and the imported prices."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from tests.prices.helpers import import_file, write_csv
from tests.support import Tenant, client_for

DAY = datetime(2025, 7, 1, tzinfo=UTC) - timedelta(hours=2)  # 2025-07-01 00:00 Paris


def quarter_starts() -> list[datetime]:
    return [DAY + timedelta(minutes=15 * i) for i in range(96)]


def production_wh(i: int) -> float | None:
    """A bell of a sunny day for a 10 kWp roof, with a gap (no reading) from 16:00 to 16:30."""
    if i in (64, 65):
        return None
    hours_from_noon = (i - 48) / 4  # 12:00 local is quarter 48
    return round(max(0.0, 2400.0 * math.cos(hours_from_noon / 7 * math.pi / 2)), 1)


def price_at(i: int) -> float:
    """Hourly prices before 12:00 local, quarter-hourly after; negative from 11:00 to 14:00."""
    hour = i // 4
    if 11 <= hour < 14:
        return -25.0 - (i % 4 if hour >= 12 else 0)
    return 60.0 + hour + (i % 4 * 0.5 if hour >= 12 else 0)


async def make_system(client: Any, market_zone: str | None) -> str:
    body: dict[str, Any] = {
        "name": "Rooftop Lyon",
        "capacity_kwp": 10.0,
        "location": {"latitude": 45.76, "longitude": 4.84, "timezone": "Europe/Paris"},
    }
    if market_zone is not None:
        body["market_zone"] = market_zone
    response = await client.post("/api/v1/systems", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_value_equals_energy_times_price_per_quarter_hour(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    starts = quarter_starts()
    rows = [
        (start.isoformat(), price_at(i)) for i, start in enumerate(starts) if i < 48 and i % 4 == 0
    ]
    rows += [(start.isoformat(), price_at(i)) for i, start in enumerate(starts) if i >= 48]
    await import_file(app, write_csv(tmp_path, "fr.csv", rows), "FR")

    async with client_for(app, enterprise.live) as client:
        system_id = await make_system(client, "FR")
        readings = [
            {"timestamp": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "energy_wh": production_wh(i)}
            for i, start in enumerate(starts)
            if production_wh(i) is not None
        ]
        upload = await client.post(
            f"/api/v1/systems/{system_id}/readings", json={"readings": readings}
        )
        assert upload.status_code == 200, upload.text

        params = {"from": "2025-07-01T00:00:00+02:00", "to": "2025-07-02T00:00:00+02:00"}
        hourly = (
            await client.get(f"/api/v1/systems/{system_id}/market-value", params=params)
        ).json()
        daily = (
            await client.get(
                f"/api/v1/systems/{system_id}/market-value", params={**params, "interval": "1d"}
            )
        ).json()

    # The independent computation: each quarter-hour's energy (MWh) × its price, in EUR.
    value = [
        None if production_wh(i) is None else production_wh(i) / 1e6 * price_at(i)  # type: ignore[operator]
        for i in range(96)
    ]
    assert len(hourly["data"]) == 24
    for hour, bucket in enumerate(hourly["data"]):
        quarters = range(hour * 4, hour * 4 + 4)
        energies = [production_wh(i) for i in quarters if production_wh(i) is not None]
        values = [value[i] for i in quarters if value[i] is not None]
        assert bucket["start"] == (DAY + timedelta(hours=hour)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert (
            bucket["energy_wh"] == pytest.approx(sum(energies))
            if energies
            else bucket["energy_wh"] is None
        )
        if values:
            assert bucket["value_eur"] == pytest.approx(sum(values), abs=1e-4)
        else:
            assert bucket["value_eur"] is None
        if sum(energies) > 0:
            assert bucket["price_eur_per_mwh"] == pytest.approx(
                sum(values) / sum(energies) * 1e6, abs=1e-3
            )
        else:  # nothing produced: the time-weighted mean price
            assert bucket["price_eur_per_mwh"] == pytest.approx(
                sum(price_at(i) for i in quarters) / 4, abs=1e-3
            )
    noon = hourly["data"][12]
    # A sunny noon at a negative price has a negative value.
    assert noon["energy_wh"] > 0
    assert noon["value_eur"] < 0

    total_value = sum(v for v in value if v is not None)
    total_energy = sum(e for e in (production_wh(i) for i in range(96)) if e is not None)
    [day] = daily["data"]
    assert day["value_eur"] == pytest.approx(total_value, abs=1e-4)
    assert day["energy_wh"] == pytest.approx(total_energy)
    # Valuing per quarter-hour differs from valuing the day's energy at its mean price.
    mean_price = sum(price_at(i) for i in range(96)) / 96
    assert abs(total_energy / 1e6 * mean_price - total_value) > 1.0
    for body in (hourly, daily):
        totals = body["meta"]["totals"]
        assert totals["value_eur"] == pytest.approx(total_value, abs=1e-4)
        assert totals["energy_wh"] == pytest.approx(total_energy)
        assert totals["price_eur_per_mwh"] == pytest.approx(
            total_value / total_energy * 1e6, abs=1e-3
        )
    assert daily["meta"]["system_id"] == system_id
    assert daily["meta"]["market_zone"] == "FR"
    assert daily["meta"]["source"] == "csv"
    # The trader's figures (2026-11-25), computed independently per quarter-hour.
    baseload = sum(price_at(i) for i in range(96)) / 96
    negative = [i for i in range(96) if price_at(i) < 0 and production_wh(i) is not None]
    capture = total_value / total_energy * 1e6
    for body in (hourly, daily):
        totals = body["meta"]["totals"]
        assert totals["priced_energy_wh"] == pytest.approx(total_energy)
        assert totals["capture_price_eur_per_mwh"] == totals["price_eur_per_mwh"]
        assert totals["baseload_price_eur_per_mwh"] == pytest.approx(baseload, abs=1e-3)
        assert totals["capture_rate"] == pytest.approx(capture / baseload, abs=1e-4)
        assert totals["negative_price_energy_wh"] == pytest.approx(
            sum(production_wh(i) for i in negative)  # type: ignore[misc]
        )
        assert totals["negative_price_value_eur"] == pytest.approx(
            sum(value[i] for i in negative),
            abs=1e-4,  # type: ignore[misc]
        )
    async with client_for(app, enterprise.live) as client:
        for interval in ("1h", "1d", "1w", "1M"):
            prices = await client.get(
                "/api/v1/market-prices", params={"zone": "FR", "interval": interval, **params}
            )
            assert prices.status_code == 200, prices.text
            price_totals = prices.json()["meta"]["totals"]
            if interval in ("1h", "1d"):  # the day exactly: the baseload of the value
                assert price_totals == {
                    "mean_price_eur_per_mwh": totals["baseload_price_eur_per_mwh"],
                    "min_price_eur_per_mwh": -28.0,
                    "max_price_eur_per_mwh": 84.5,
                    "priced_quarter_hours": 96,
                    "negative_quarter_hours": 12,
                }
            else:  # the widened week or month holds the same priced quarter-hours
                assert price_totals["priced_quarter_hours"] == 96
                assert price_totals["mean_price_eur_per_mwh"] == pytest.approx(baseload, abs=1e-3)
                [bucket] = prices.json()["data"]
                assert bucket["price_eur_per_mwh"] == pytest.approx(baseload, abs=1e-3)
    assert (daily["meta"]["from"], daily["meta"]["to"]) == (
        "2025-06-30T22:00:00Z",
        "2025-07-01T22:00:00Z",
    )


async def test_value_is_null_where_the_price_is(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await make_system(client, "ES")
        upload = await client.post(
            f"/api/v1/systems/{system_id}/readings",
            json={"readings": [{"timestamp": "2003-05-01T10:00:00Z", "energy_wh": 500.0}]},
        )
        assert upload.status_code == 200, upload.text
        response = await client.get(
            f"/api/v1/systems/{system_id}/market-value",
            params={"from": "2003-05-01T10:00:00Z", "to": "2003-05-01T12:00:00Z"},
        )
    body = response.json()
    assert [b["energy_wh"] for b in body["data"]] == [500.0, None]
    assert [b["value_eur"] for b in body["data"]] == [None, None]
    assert [b["price_eur_per_mwh"] for b in body["data"]] == [None, None]
    assert body["meta"]["totals"] == {
        "energy_wh": 500.0,
        "value_eur": None,
        "price_eur_per_mwh": None,
        "priced_energy_wh": 0.0,
        "capture_price_eur_per_mwh": None,
        "baseload_price_eur_per_mwh": None,
        "capture_rate": None,
        "negative_price_energy_wh": 0.0,
        "negative_price_value_eur": 0.0,
    }


async def test_system_without_zone_is_409_and_others_are_404(
    app: FastAPI, enterprise: Tenant, pro: Tenant, starter: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = await make_system(client, None)
        response = await client.get(f"/api/v1/systems/{system_id}/market-value")
        assert response.status_code == 409
        assert response.json()["code"] == "conflict"
        assert "has no market_zone" in response.json()["error"]
        bad = await client.get(
            f"/api/v1/systems/{system_id}/market-value", params={"interval": "2x"}
        )
        assert bad.status_code == 400  # parameters are checked before the system's state
    async with client_for(app, enterprise.test) as client:  # the other environment
        assert (await client.get(f"/api/v1/systems/{system_id}/market-value")).status_code == 404
    async with client_for(app, pro.live) as client:  # another account
        other = await client.get(f"/api/v1/systems/{system_id}/market-value")
        assert other.status_code == 404
        assert other.json()["code"] == "not_found"
    async with client_for(app, starter.live) as client:
        assert (await client.get(f"/api/v1/systems/{system_id}/market-value")).status_code == 403


async def test_sandbox_value_uses_simulated_prices(app: FastAPI, enterprise: Tenant) -> None:
    from solarapi.sandbox.prices import simulate_prices

    day = {"from": "2025-06-21T00:00:00+02:00", "to": "2025-06-22T00:00:00+02:00"}
    async with client_for(app, enterprise.test) as client:
        created = await client.post(
            "/api/v1/systems",
            json={
                "name": "Sandbox roof",
                "capacity_kwp": 6.0,
                "market_zone": "NL",
                "location": {"latitude": 52.1, "longitude": 5.1, "timezone": "Europe/Amsterdam"},
            },
        )
        assert created.status_code == 201, created.text
        system_id = created.json()["id"]
        value = (
            await client.get(
                f"/api/v1/systems/{system_id}/market-value", params={**day, "interval": "1d"}
            )
        ).json()
        readings = (
            await client.get(
                f"/api/v1/systems/{system_id}/readings", params={**day, "interval": "15m"}
            )
        ).json()
    _, prices = simulate_prices(
        "NL", datetime(2025, 6, 20, 22, tzinfo=UTC), datetime(2025, 6, 21, 22, tzinfo=UTC)
    )
    energy = [item["energy_wh"] for item in readings["data"]]
    assert len(energy) == len(prices) == 96
    expected = sum(e / 1e6 * p for e, p in zip(energy, prices, strict=True) if e is not None)
    assert value["meta"]["source"] == "simulated"
    assert value["data"][0]["value_eur"] == pytest.approx(expected, abs=1e-3)
    assert value["data"][0]["energy_wh"] == pytest.approx(
        sum(e for e in energy if e is not None), abs=0.1
    )
