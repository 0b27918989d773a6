"""`GET /market-prices` and `/market-prices/zones` over HTTP, on SQLite and PostgreSQL.

Prices are shared market data, not per account, so every test works in its own zone and
dates and never assumes the table is empty elsewhere.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from solarapi.kit.zones import ZONES
from tests.prices.helpers import DATA, import_file, stored_rows, utc, write_csv
from tests.support import Tenant, client_for

JUNE_15_NL = [82.1, 78.4, 75.0, 73.2, 74.9, 80.3, 95.7, 110.2, 98.4, 60.1, 20.5, -2.3,
              -12.75, -8.4, 5.0, 40.2, 85.6, 120.3, 145.9, 160.4, 130.2, 110.7, 95.3, 88.8]  # fmt: skip


async def get_prices(app: FastAPI, key: str, **params: str) -> Any:
    async with client_for(app, key) as client:
        response = await client.get("/api/v1/market-prices", params=params)
    return response


async def test_zones_list_the_contract_zones(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        response = await client.get("/api/v1/market-prices/zones")
    assert response.status_code == 200
    zones = {zone["code"]: zone for zone in response.json()["data"]}
    required = [
        "NL",
        "BE",
        "DE-LU",
        "FR",
        "AT",
        "CH",
        "DK1",
        "DK2",
        "ES",
        "PL",
        "SE3",
        "SE4",
        "NO1",
        "FI",
        "IT-NORD",
    ]
    assert set(required) <= set(zones)
    assert zones["NL"] == {
        "code": "NL",
        "name": "Netherlands",
        "eic": "10YNL----------L",
        "timezone": "Europe/Amsterdam",
        "currency": "EUR",
    }
    assert len({zone["eic"] for zone in zones.values()}) == len(zones)


async def test_hourly_document_through_the_api(app: FastAPI, pro: Tenant) -> None:
    result = await import_file(app, DATA / "a44_nl_2025-06-15_pt60m.xml", "NL")
    assert (result.stored, result.resolutions_s) == (24, (3600,))

    response = await get_prices(
        app,
        pro.live,
        zone="NL",
        **{"from": "2025-06-15T00:00:00+02:00"},
        to="2025-06-16T00:00:00+02:00",
    )
    assert response.status_code == 200
    body = response.json()
    assert [item["price_eur_per_mwh"] for item in body["data"]] == JUNE_15_NL
    assert body["data"][0] == {
        "start": "2025-06-14T22:00:00Z",
        "end": "2025-06-14T23:00:00Z",
        "price_eur_per_mwh": 82.1,
    }
    totals = body["meta"].pop("totals")
    hourly = [bucket["price_eur_per_mwh"] for bucket in body["data"]]
    assert totals["priced_quarter_hours"] == 96
    assert totals["mean_price_eur_per_mwh"] == pytest.approx(sum(hourly) / 24, abs=1e-3)
    assert (totals["min_price_eur_per_mwh"], totals["max_price_eur_per_mwh"]) == (
        min(hourly),
        max(hourly),
    )
    assert totals["negative_quarter_hours"] == 4 * sum(price < 0 for price in hourly)
    assert body["meta"] == {
        "zone": "NL",
        "interval": "1h",
        "from": "2025-06-14T22:00:00Z",
        "to": "2025-06-15T22:00:00Z",
        "currency": "EUR",
        "unit": "MWh",
        "source": "entsoe",
    }

    # A 15-minute bucket carries the hourly price covering it.
    quarter = await get_prices(
        app,
        pro.live,
        zone="NL",
        interval="15m",
        **{"from": "2025-06-15T10:00:00Z"},
        to="2025-06-15T12:00:00Z",
    )
    # 10:00Z is 12:00 Amsterdam, the 13th hour of the local day.
    assert [item["price_eur_per_mwh"] for item in quarter.json()["data"]] == [-12.75] * 4 + [
        -8.4
    ] * 4

    # The local day's time-weighted mean.
    daily = await get_prices(
        app,
        pro.live,
        zone="NL",
        interval="1d",
        **{"from": "2025-06-15T00:00:00+02:00"},
        to="2025-06-15T23:00:00+02:00",
    )
    [day] = daily.json()["data"]
    assert (day["start"], day["end"]) == ("2025-06-14T22:00:00Z", "2025-06-15T22:00:00Z")
    assert day["price_eur_per_mwh"] == pytest.approx(sum(JUNE_15_NL) / 24, abs=1e-3)


async def test_reimport_is_idempotent(app: FastAPI, pro: Tenant) -> None:
    path = DATA / "a44_de_2025-10-01_pt15m_a03.xml"
    params = {
        "zone": "DE-LU",
        "from": "2025-10-01T00:00:00+02:00",
        "to": "2025-10-02T00:00:00+02:00",
    }
    await import_file(app, path, "DE-LU")
    first_rows = await stored_rows(
        app, "DE-LU", utc("2025-09-30T00:00:00Z"), utc("2025-10-03T00:00:00Z")
    )
    first = (await get_prices(app, pro.live, **params)).json()
    again = await import_file(app, path, "DE-LU")
    assert (again.stored, again.replaced) == (96, 96)
    second_rows = await stored_rows(
        app, "DE-LU", utc("2025-09-30T00:00:00Z"), utc("2025-10-03T00:00:00Z")
    )
    second = (await get_prices(app, pro.live, **params)).json()
    assert len(first_rows) == 96
    assert [row[:3] for row in second_rows] == [row[:3] for row in first_rows]
    assert second == first
    # Hourly means of the A03 curve: positions 1-4 are 100, 98.5, 98.5, 98.5.
    assert first["data"][0]["price_eur_per_mwh"] == pytest.approx((100 + 3 * 98.5) / 4, abs=1e-3)
    # Hour 10 (positions 37-40): 90, 90, 90, -3.25.
    assert first["data"][9]["price_eur_per_mwh"] == pytest.approx((3 * 90 - 3.25) / 4, abs=1e-3)


async def test_dst_days_have_23_and_25_hours(app: FastAPI, pro: Tenant) -> None:
    await import_file(app, DATA / "a44_nl_dst_days.xml", "NL")
    spring = await get_prices(
        app,
        pro.live,
        zone="NL",
        **{"from": "2025-03-30T00:00:00+01:00"},
        to="2025-03-31T00:00:00+02:00",
    )
    hours = spring.json()["data"]
    assert len(hours) == 23
    assert [item["price_eur_per_mwh"] for item in hours] == [50.0 + i for i in range(1, 24)]

    days = await get_prices(
        app, pro.live, zone="NL", interval="1d",
        **{"from": "2025-10-26T00:00:00+02:00"}, to="2025-10-27T00:00:00+01:00",
    )  # fmt: skip
    [day] = days.json()["data"]
    assert (day["start"], day["end"]) == ("2025-10-25T22:00:00Z", "2025-10-26T23:00:00Z")
    # 100 quarter-hours: 8 × 70, 40 × 65, 48 × −1.5, 4 × 80.
    assert day["price_eur_per_mwh"] == pytest.approx(
        (8 * 70 + 40 * 65 - 48 * 1.5 + 4 * 80) / 100, abs=1e-3
    )
    spring_day = await get_prices(
        app, pro.live, zone="NL", interval="1d",
        **{"from": "2025-03-30T00:00:00+01:00"}, to="2025-03-31T00:00:00+02:00",
    )  # fmt: skip
    [day] = spring_day.json()["data"]
    assert (day["start"], day["end"]) == ("2025-03-29T23:00:00Z", "2025-03-30T22:00:00Z")
    assert day["price_eur_per_mwh"] == pytest.approx(sum(50 + i for i in range(1, 24)) / 23)


async def test_mixed_resolutions_aggregate_time_weighted(
    app: FastAPI, pro: Tenant, tmp_path: Path
) -> None:
    # Vienna: hourly prices on 2025-09-30, quarter-hourly on 2025-10-01 (local days).
    hourly = [(f"2025-09-30T{h:02d}:00:00+02:00", 40.0 + h) for h in range(24)]
    quarterly = [
        (f"2025-10-01T{q // 4:02d}:{q % 4 * 15:02d}:00+02:00", float(q % 7) * 10 - 20)
        for q in range(96)
    ]
    await import_file(app, write_csv(tmp_path, "hourly.csv", hourly), "AT")
    await import_file(app, write_csv(tmp_path, "quarterly.csv", quarterly), "AT")

    days = await get_prices(
        app, pro.live, zone="AT", interval="1d",
        **{"from": "2025-09-30T00:00:00+02:00"}, to="2025-10-02T00:00:00+02:00",
    )  # fmt: skip
    body = days.json()
    assert body["meta"]["source"] == "csv"
    assert [item["price_eur_per_mwh"] for item in body["data"]] == [
        pytest.approx(sum(40.0 + h for h in range(24)) / 24, abs=1e-3),
        pytest.approx(sum(float(q % 7) * 10 - 20 for q in range(96)) / 96, abs=1e-3),
    ]
    # An hour straddling nothing: 1h over quarter-hours is their mean; over an hourly price,
    # the price itself.
    hours = await get_prices(
        app,
        pro.live,
        zone="AT",
        **{"from": "2025-09-30T23:00:00+02:00"},
        to="2025-10-01T01:00:00+02:00",
    )
    assert [item["price_eur_per_mwh"] for item in hours.json()["data"]] == [
        63.0,
        pytest.approx(sum(float(q % 7) * 10 - 20 for q in range(4)) / 4),
    ]


async def test_finer_over_coarser_keeps_the_uncovered_rest(
    app: FastAPI, pro: Tenant, tmp_path: Path
) -> None:
    hourly = [(f"2024-02-10T{h:02d}:00:00Z", 100.0 + h) for h in range(24)]
    await import_file(app, write_csv(tmp_path, "hourly.csv", hourly), "BE")
    # Three quarter-hours from 10:30 to 11:15 replace parts of the 10:00 and 11:00 hours.
    finer = [
        ("2024-02-10T10:30:00Z", 1.0),
        ("2024-02-10T10:45:00Z", 2.0),
        ("2024-02-10T11:00:00Z", 3.0),
    ]
    result = await import_file(app, write_csv(tmp_path, "finer.csv", finer), "BE")
    assert (result.stored, result.replaced) == (3, 2)

    quarters = await get_prices(
        app,
        pro.live,
        zone="BE",
        interval="15m",
        **{"from": "2024-02-10T10:00:00Z"},
        to="2024-02-10T12:00:00Z",
    )
    assert [item["price_eur_per_mwh"] for item in quarters.json()["data"]] == [
        110.0, 110.0, 1.0, 2.0, 3.0, 111.0, 111.0, 111.0,
    ]  # fmt: skip
    rows = await stored_rows(app, "BE", utc("2024-02-10T09:00:00Z"), utc("2024-02-10T13:00:00Z"))
    spans = [(start.timestamp(), start.timestamp() + length) for start, length, _, _ in rows]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), "rows overlap"
    assert sum(b - a for a, b in spans) == 4 * 3600  # 09:00-13:00 still fully priced

    # Coarser over finer: an hourly import over those quarter-hours replaces them all.
    coarser = [("2024-02-10T10:00:00Z", 7.0), ("2024-02-10T11:00:00Z", 8.0)]
    result = await import_file(app, write_csv(tmp_path, "coarser.csv", coarser), "BE")
    # Eight quarter-hour rows lay in 10:00-12:00: two and three kept rests, three new.
    assert result.replaced == 8
    rows = await stored_rows(app, "BE", utc("2024-02-10T10:00:00Z"), utc("2024-02-10T12:00:00Z"))
    assert [(row[0].isoformat(), row[1], row[2]) for row in rows] == [
        ("2024-02-10T10:00:00+00:00", 3600, 7.0),
        ("2024-02-10T11:00:00+00:00", 3600, 8.0),
    ]
    # The API answers from a cache of quarter-hour prices: the import must invalidate it.
    again = await get_prices(
        app,
        pro.live,
        zone="BE",
        interval="15m",
        **{"from": "2024-02-10T10:00:00Z"},
        to="2024-02-10T12:00:00Z",
    )
    assert [item["price_eur_per_mwh"] for item in again.json()["data"]] == [7.0] * 4 + [8.0] * 4


async def test_no_price_is_null_and_negative_prices_stay(app: FastAPI, pro: Tenant) -> None:
    response = await get_prices(
        app, pro.live, zone="PL", **{"from": "2001-01-01T00:00:00Z"}, to="2001-01-01T03:00:00Z"
    )
    body = response.json()
    assert [item["price_eur_per_mwh"] for item in body["data"]] == [None, None, None]
    assert body["meta"]["source"] is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "zone is required"),
        ({"zone": "XX"}, "zone must be one of NL, BE"),
        ({"zone": "NL", "interval": "30m"}, "interval must be one of 15m, 1h, 1d, 1w, 1M; got '30m'"),
        ({"zone": "NL", "from": "2025-06-01T00:00:00"}, "from: '2025-06-01T00:00:00' has no time zone"),
        ({"zone": "NL", "from": "2025-06-02T00:00:00Z", "to": "2025-06-01T00:00:00Z"}, "'from' must be before 'to'"),
        ({"zone": "NL", "interval": "15m", "from": "2025-01-01T00:00:00Z", "to": "2025-12-31T00:00:00Z"},
         "the largest allowed 'to' is 2025-04-15T04:00:00Z"),
    ],
)  # fmt: skip
async def test_bad_parameters_are_400(
    app: FastAPI, pro: Tenant, params: dict[str, str], message: str
) -> None:
    response = await get_prices(app, pro.live, **params)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "validation"
    assert message in body["error"]


async def test_pro_reads_starter_cannot(app: FastAPI, pro: Tenant, starter: Tenant) -> None:
    for path in ("/api/v1/market-prices/zones", "/api/v1/market-prices?zone=NL"):
        async with client_for(app, pro.live) as client:
            assert (await client.get(path)).status_code == 200
        async with client_for(app, starter.live) as client:
            refused = await client.get(path)
        assert refused.status_code == 403
        assert refused.json()["code"] == "forbidden"


async def test_sandbox_and_live_differ_in_source(app: FastAPI, pro: Tenant) -> None:
    await import_file(app, DATA / "a44_nl_2025-06-15_pt60m.xml", "NL")
    params = {"zone": "NL", "from": "2025-06-15T00:00:00+02:00", "to": "2025-06-16T00:00:00+02:00"}
    live = (await get_prices(app, pro.live, **params)).json()
    sandbox = (await get_prices(app, pro.test, **params)).json()
    assert live["meta"]["source"] == "entsoe"
    assert sandbox["meta"]["source"] == "simulated"
    assert [item["start"] for item in sandbox["data"]] == [item["start"] for item in live["data"]]
    assert [item["price_eur_per_mwh"] for item in sandbox["data"]] != JUNE_15_NL
    # The sandbox's hourly buckets are the means of the price model's quarter-hours.
    from solarapi.sandbox.prices import simulate_prices

    _, model = simulate_prices("NL", utc("2025-06-14T22:00:00Z"), utc("2025-06-15T22:00:00Z"))
    expected = [sum(model[i * 4 : i * 4 + 4]) / 4 for i in range(24)]
    got = [item["price_eur_per_mwh"] for item in sandbox["data"]]
    assert got == [pytest.approx(value, abs=1e-3) for value in expected]


def test_every_zone_has_a_valid_time_zone() -> None:
    from zoneinfo import ZoneInfo

    for zone in ZONES.values():
        assert ZoneInfo(zone.timezone).key == zone.timezone
