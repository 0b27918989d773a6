"""`/portfolio/readings` and `/portfolio/summary`: every number equals the per-system
endpoint's, totals cover every matching system, filters, paging and bad input; both
databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from solarapi.readings import repository
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload

JUNE = datetime(2025, 6, 14, tzinfo=UTC)
ZONES = [
    ("Europe/Amsterdam", "NL"),
    ("Asia/Kolkata", None),
    ("Australia/Sydney", None),
    ("America/New_York", "DE-LU"),
]


async def _fleet(client: httpx.AsyncClient) -> list[str]:
    ids = []
    for i, (timezone, zone) in enumerate(ZONES):
        body: dict[str, Any] = {
            "name": f"Roof {i}",
            "location": {"latitude": 10.0, "longitude": 5.0, "timezone": timezone},
            "market_zone": zone,
        }
        system_id = (await create_system(client, **body))["id"]
        ids.append(system_id)
        if i == 3:
            continue  # one system without readings
        response = await upload(
            client,
            system_id,
            quarter_series(JUNE + timedelta(hours=i * 7), 200 - i * 30, 10.5 + i, 100.0 + i),
        )
        assert response.status_code == 200, response.text
    return ids


async def _get(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/api/v1{path}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("interval", ["15m", "1h", "1d", "1w", "1M"])
async def test_readings_equal_the_per_system_endpoint(
    app: FastAPI, enterprise: Tenant, interval: str
) -> None:
    window = {"from": "2025-06-13T21:30:00Z", "to": "2025-06-17T02:00:00Z", "interval": interval}
    async with client_for(app, enterprise.live) as client:
        ids = await _fleet(client)
        fleet = await _get(client, "/portfolio/readings", **window)
        singles = [
            await _get(client, f"/systems/{system_id}/readings", **window) for system_id in ids
        ]
    assert [item["system_id"] for item in fleet["data"]] == ids
    for item, single in zip(fleet["data"], singles, strict=True):
        assert item["data"] == single["data"]
        assert item["totals"] == single["meta"]["totals"]
        assert item["timezone"] == single["meta"]["timezone"]
        assert (item["from"], item["to"]) == (single["meta"]["from"], single["meta"]["to"])
    totals = fleet["meta"]["totals"]
    energies = [single["meta"]["totals"]["energy_wh"] for single in singles]
    assert totals["energy_wh"] == round(sum(e for e in energies if e is not None), 3)
    assert totals["samples"] == sum(s["meta"]["totals"]["samples"] for s in singles)
    assert totals["expected_samples"] == sum(
        s["meta"]["totals"]["expected_samples"] for s in singles
    )
    assert (totals["systems"], totals["systems_with_data"]) == (4, 3)
    assert fleet["meta"]["interval"] == interval
    assert fleet["meta"]["from"] == window["from"]


async def test_paging_filters_and_totals_over_every_match(app: FastAPI, enterprise: Tenant) -> None:
    window = {"from": "2025-06-14T00:00:00Z", "to": "2025-06-16T00:00:00Z"}
    async with client_for(app, enterprise.live) as client:
        ids = await _fleet(client)
        everything = await _get(client, "/portfolio/readings", **window)
        first = await _get(client, "/portfolio/readings", limit=3, **window)
        second = await _get(client, "/portfolio/readings", limit=3, page=2, **window)
        past = await _get(client, "/portfolio/readings", limit=3, page=3, **window)
        by_zone = await _get(client, "/portfolio/readings", market_zone="NL", **window)
        chosen = await _get(
            client, "/portfolio/readings", system_ids=f"{ids[2]},{ids[0]}", **window
        )
        await client.patch(f"/api/v1/systems/{ids[1]}", json={"status": "inactive"})
        active = await _get(client, "/portfolio/summary", status="active")
        inactive_of_chosen = await _get(
            client, "/portfolio/summary", status="inactive", system_ids=f"{ids[0]},{ids[1]}"
        )
    assert everything["meta"]["totals"]["systems"] == 4
    assert [i["system_id"] for i in first["data"]] == ids[:3]
    assert [i["system_id"] for i in second["data"]] == ids[3:]
    assert past["data"] == []
    assert first["pagination"] == {
        "page": 1, "limit": 3, "total": 4, "total_pages": 2, "has_more": True,
    }  # fmt: skip
    # Totals cover every matching system, whatever the page.
    assert first["meta"]["totals"] == everything["meta"]["totals"] == second["meta"]["totals"]
    assert [i["system_id"] for i in by_zone["data"]] == [ids[0]]
    assert by_zone["meta"]["totals"]["systems"] == 1
    # Ordered by created_at, id — not by the order of system_ids.
    assert [i["system_id"] for i in chosen["data"]] == [ids[0], ids[2]]
    assert [i["system_id"] for i in active["data"]] == [ids[0], ids[2], ids[3]]
    assert [i["system_id"] for i in inactive_of_chosen["data"]] == [ids[1]]


async def test_summary_equals_the_per_system_endpoint(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        ids = await _fleet(client)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        recent = now - timedelta(minutes=now.minute % 15) - timedelta(hours=2)
        await upload(client, ids[3], quarter_series(recent, 4, 500.0, 2000.0))
        fleet = await _get(client, "/portfolio/summary")
        singles = [await _get(client, f"/systems/{system_id}/summary") for system_id in ids]
        capacities = [(await _get(client, f"/systems/{i}"))["capacity_kwp"] for i in ids]
    for item, single in zip(fleet["data"], singles, strict=True):
        assert {k: v for k, v in item.items() if k != "system_id"} == single
    totals = fleet["meta"]["totals"]
    for name in ("energy_today_wh", "energy_month_wh", "energy_year_wh", "energy_lifetime_wh"):
        values = [single[name] for single in singles if single[name] is not None]
        assert totals[name] == (round(sum(values), 3) if values else None)
    assert totals["systems"] == 4
    assert totals["capacity_kwp"] == round(sum(capacities), 3)
    reporting = [i for i, s in enumerate(singles) if s["energy_today_wh"] is not None]
    assert totals["systems_reporting_today"] == len(reporting)
    if reporting:
        today = sum(singles[i]["energy_today_wh"] for i in reporting)
        capacity = sum(capacities[i] for i in reporting)
        assert totals["specific_yield_today_kwh_kwp"] == round(today / 1000 / capacity, 4)


async def test_bad_input(app: FastAPI, enterprise: Tenant, pro: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        ids = await _fleet(client)
        async with client_for(app, enterprise.test) as sandbox:
            sandbox_id = (await create_system(sandbox))["id"]
        async with client_for(app, pro.live) as other:
            foreign_id = (await _get(other, "/portfolio/summary"))["data"]
        assert foreign_id == []

        async def status_of(path: str, **params: Any) -> tuple[int, str]:
            response = await client.get(f"/api/v1{path}", params=params)
            return response.status_code, response.json().get("error", "")

        code, error = await status_of("/portfolio/readings", system_ids=f"{ids[0]},{ids[0]}")
        assert code == 400
        assert "twice" in error
        code, error = await status_of("/portfolio/summary", system_ids=",".join(["x"] * 1001))
        assert code == 400
        assert "1,000" in error
        code, error = await status_of("/portfolio/summary", system_ids=f"{ids[0]},{sandbox_id}")
        assert code == 404
        assert sandbox_id in error
        code, error = await status_of("/portfolio/summary", system_ids="sys_unknown")
        assert code == 404
        assert "sys_unknown" in error
        for params in ({"limit": "0"}, {"limit": "1001"}, {"page": "0"}, {"status": "on"},
                       {"market_zone": "XX"}, {"system_ids": "a,,b"}):  # fmt: skip
            assert (await status_of("/portfolio/summary", **params))[0] == 400, params
        code, error = await status_of("/portfolio/readings", interval="2h")
        assert code == 400
        # 120 days of quarter-hours: over the per-system 10,000 buckets, as on the
        # per-system endpoint.
        long_range = {"from": "2025-01-01T00:00:00Z", "to": "2025-05-01T00:00:00Z"}
        code, error = await status_of("/portfolio/readings", interval="15m", **long_range)
        assert code == 400
        assert "10,000" in error


async def test_page_over_the_bucket_cap_names_the_limit(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        for i in range(11):
            await create_system(client, name=f"S{i}")
        # 11 systems × 9,600 quarter-hours = 105,600 > 100,000; 10 fit.
        params = {"interval": "15m", "from": "2025-01-01T00:00:00Z", "to": "2025-04-11T00:00:00Z"}
        response = await client.get("/api/v1/portfolio/readings", params=params)
        assert response.status_code == 400, response.text
        assert "largest limit that fits this range and interval is 10" in response.json()["error"]
        fits = await client.get("/api/v1/portfolio/readings", params={**params, "limit": 10})
        assert fits.status_code == 200
        assert fits.json()["meta"]["totals"]["systems"] == 11


async def test_oversized_page_is_400_before_an_unknown_id_is_404(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The order of checks (400 validation before 404 existence): a page over the bucket
    cap that also names an unknown id is the 400; the same unknown id on a page that fits is
    the 404 naming it, on both endpoints that check the page size."""
    async with client_for(app, enterprise.live) as client:
        ids = [(await create_system(client, name=f"S{i}"))["id"] for i in range(11)]
        unknown = "sys_not_here"
        oversized = {
            "interval": "15m",
            "from": "2025-01-01T00:00:00Z",
            "to": "2025-04-11T00:00:00Z",
            "system_ids": ",".join([*ids, unknown]),
        }
        for path in ("/portfolio/readings", "/portfolio/market-value"):
            response = await client.get(f"/api/v1{path}", params=oversized)
            assert response.status_code == 400, (path, response.text)
            assert "largest limit that fits" in response.json()["error"], path
            fits = await client.get(f"/api/v1{path}", params={**oversized, "limit": 10})
            assert fits.status_code == 404, (path, fits.text)
            assert fits.json() == {"error": f"No system with id '{unknown}'", "code": "not_found"}


async def test_empty_fleet_and_sandbox_fleet(app: FastAPI, enterprise: Tenant, pro: Tenant) -> None:
    """No system: empty data, null energy. The sandbox's simulated systems: the model's rows
    go through the same aggregation as stored ones, equal to the per-system endpoint's."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    window = {
        "from": (today - timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "to": (today - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "interval": "1d",
    }
    async with client_for(app, pro.live) as client:
        empty = await _get(client, "/portfolio/readings", **window)
    assert empty["data"] == []
    assert empty["meta"]["totals"] == {
        "energy_wh": None, "samples": 0, "expected_samples": 0, "systems": 0,
        "systems_with_data": 0,
    }  # fmt: skip
    async with client_for(app, enterprise.test) as sandbox:
        await create_system(sandbox, name="Simulated")
        fleet = await _get(sandbox, "/portfolio/readings", **window)
        assert fleet["data"], "the sandbox has simulated systems"
        for item in fleet["data"]:
            single = await _get(sandbox, f"/systems/{item['system_id']}/readings", **window)
            assert item["data"] == single["data"]
            assert item["totals"] == single["meta"]["totals"]
    assert fleet["meta"]["totals"]["systems_with_data"] >= 1


async def test_latest_readings_of_many_equal_one_by_one(app: FastAPI, enterprise: Tenant) -> None:
    """The fleet summary's one statement for every system's latest reading gives what
    `latest_reading` gives each system with its own bound: below, at and above its latest
    start, without a bound, and for a system without readings."""
    async with client_for(app, enterprise.live) as client:
        ids = await _fleet(client)
    async with app.state.sessionmaker() as session:
        latest = [await repository.latest_reading(session, i) for i in ids]
        assert latest[0] is not None
        assert latest[3] is None
        last_s = latest[0][0]
        cases: list[list[int | None]] = [
            [None, None, None, None],
            [last_s - 900, last_s, last_s + 900, None],
            [last_s + 900, 0, last_s, 0],
            [0, last_s - 86_400 * 5, last_s - 900, last_s],
        ]
        for bounds in cases:
            many = await repository.latest_readings(session, ids, bounds)
            one_by_one = [
                await repository.latest_reading(session, i, bound)
                for i, bound in zip(ids, bounds, strict=True)
            ]
            assert many == one_by_one, bounds
        # Some answered, some not, so the comparison above could fail either way.
        answered = await repository.latest_readings(session, ids, cases[2])
        assert answered[0] is None
        assert answered[1] is not None
