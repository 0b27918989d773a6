"""`GET /systems/{id}/readings`: the bucket grid over HTTP, on both databases.

Expected values are worked out by hand from the calendar (e.g. Amsterdam's 2025-03-30 has 23
hours), never taken from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from solarapi.kit.ids import new_id
from solarapi.models.systems import System
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload


def _tz_system(timezone: str, latitude: float = 52.0, longitude: float = 5.0) -> dict[str, Any]:
    return {
        "location": {"latitude": latitude, "longitude": longitude, "timezone": timezone},
        "market_zone": None,
        "capacity_kwp": 10.0,
    }


async def _pro_system(app: FastAPI, pro: Tenant) -> System:
    """A live system of a Pro account (which cannot create one over the API)."""
    now = datetime.now(UTC)
    system = System(
        id=new_id("sys"), account_id=pro.account_id, environment="live", name="p",
        status="active", data_source="metered", capacity_kwp=5.0, latitude=52.0,
        longitude=5.0, timezone="Europe/Amsterdam", tilt_deg=30.0, azimuth_deg=180.0,
        created_at=now, updated_at=now,
    )  # fmt: skip
    async with app.state.sessionmaker() as session, session.begin():
        session.add(system)
    return system


async def _query(client: Any, system_id: str, **params: str) -> Any:
    response = await client.get(f"/api/v1/systems/{system_id}/readings", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def _fill(client: Any, system_id: str, start: datetime, hours: int, wh: float = 1.0) -> None:
    """`hours` hours of quarter-hours of `wh` each, from `start` (UTC), in batches."""
    items = quarter_series(start, hours * 4, wh)
    for lo in range(0, len(items), 10_000):
        response = await upload(client, system_id, items[lo : lo + 10_000])
        assert response.status_code == 200, response.text


async def test_dst_days_in_amsterdam(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Europe/Amsterdam")))["id"]
        # Every quarter-hour from 2025-03-28 to 2025-04-01 (UTC), 1 Wh each.
        await _fill(client, system_id, datetime(2025, 3, 28, tzinfo=UTC), 24 * 4)
        spring = await _query(
            client,
            system_id,
            **{
                "from": "2025-03-29T00:00:00+01:00",
                "to": "2025-04-01T00:00:00+02:00",
                "interval": "1d",
            },
        )
        await _fill(client, system_id, datetime(2025, 10, 25, tzinfo=UTC), 24 * 3)
        autumn = await _query(
            client,
            system_id,
            **{
                "from": "2025-10-26T00:00:00+02:00",
                "to": "2025-10-27T00:00:00+01:00",
                "interval": "1d",
            },
        )
    assert [(b["start"], b["end"]) for b in spring["data"]] == [
        ("2025-03-28T23:00:00Z", "2025-03-29T23:00:00Z"),
        ("2025-03-29T23:00:00Z", "2025-03-30T22:00:00Z"),  # 23 hours
        ("2025-03-30T22:00:00Z", "2025-03-31T22:00:00Z"),
    ]
    assert [b["expected_samples"] for b in spring["data"]] == [96, 92, 96]
    assert [b["samples"] for b in spring["data"]] == [96, 92, 96]
    assert [b["energy_wh"] for b in spring["data"]] == [96.0, 92.0, 96.0]
    assert spring["data"][1]["power_avg_w"] == 4.0  # 92 Wh over 23 h
    day = autumn["data"]
    assert [(b["start"], b["end"]) for b in day] == [
        ("2025-10-25T22:00:00Z", "2025-10-26T23:00:00Z")  # 25 hours
    ]
    assert (day[0]["expected_samples"], day[0]["samples"], day[0]["energy_wh"]) == (100, 100, 100.0)
    assert autumn["meta"]["from"] == "2025-10-25T22:00:00Z"
    assert autumn["meta"]["to"] == "2025-10-26T23:00:00Z"
    assert autumn["meta"]["timezone"] == "Europe/Amsterdam"


async def test_sydney_day_spans_two_utc_dates(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Australia/Sydney", -33.9, 151.2)))[
            "id"
        ]
        # 2025-06-15 10:00Z..16:00Z: 14:00Z is local midnight (AEST, +10).
        await _fill(client, system_id, datetime(2025, 6, 15, 10, tzinfo=UTC), 6, 2.0)
        body = await _query(
            client,
            system_id,
            **{"from": "2025-06-15T00:00:00Z", "to": "2025-06-16T00:00:00Z", "interval": "1d"},
        )
    assert [(b["start"], b["energy_wh"], b["samples"]) for b in body["data"]] == [
        ("2025-06-14T14:00:00Z", 32.0, 16),  # local 2025-06-15: 10:00Z-14:00Z
        ("2025-06-15T14:00:00Z", 16.0, 8),  # local 2025-06-16: 14:00Z-16:00Z
    ]


@pytest.mark.parametrize(
    ("day_utc", "expected_start", "expected_end"),
    [
        # ACST +9:30 in June; ACDT +10:30 in January.
        (datetime(2025, 6, 15, tzinfo=UTC), "2025-06-14T14:30:00Z", "2025-06-15T14:30:00Z"),
        (datetime(2025, 1, 15, tzinfo=UTC), "2025-01-14T13:30:00Z", "2025-01-15T13:30:00Z"),
    ],
)
async def test_adelaide_half_hour_days(
    app: FastAPI, enterprise: Tenant, day_utc: datetime, expected_start: str, expected_end: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Australia/Adelaide", -34.9, 138.6)))[
            "id"
        ]
        await _fill(client, system_id, day_utc - timedelta(hours=12), 36, 1.0)
        daily = await _query(
            client, system_id, **{"from": expected_start, "to": expected_end, "interval": "1d"}
        )
        fine = await _query(
            client, system_id, **{"from": expected_start, "to": expected_end, "interval": "15m"}
        )
        hourly = await _query(
            client, system_id, **{"from": expected_start, "to": expected_end, "interval": "1h"}
        )
    assert [(b["start"], b["end"]) for b in daily["data"]] == [(expected_start, expected_end)]
    assert daily["data"][0]["energy_wh"] == 96.0
    assert fine["meta"]["totals"]["energy_wh"] == 96.0
    # Hours follow the local clock (revised grid): 24 of them, 00:00–24:00 local, which
    # start at :30 UTC — not 25 UTC hours widened around the half-hour day.
    assert len(hourly["data"]) == 24
    assert (hourly["data"][0]["start"], hourly["data"][-1]["end"]) == (expected_start, expected_end)
    assert hourly["meta"]["totals"]["energy_wh"] == 96.0


async def test_kolkata_days_and_hours_agree(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Asia/Kolkata", 22.6, 88.4)))["id"]
        items = quarter_series(datetime(2025, 6, 14, 12, tzinfo=UTC), 96)
        for i, item in enumerate(items):
            item["energy_wh"] = float(i % 7)
        await upload(client, system_id, items)
        daily = await _query(
            client,
            system_id,
            **{
                "from": "2025-06-14T00:00:00+05:30",
                "to": "2025-06-16T00:00:00+05:30",
                "interval": "1d",
            },
        )
    # Local day 2025-06-15 starts at 2025-06-14T18:30Z: items 26..95 of the series.
    assert daily["data"][0]["start"] == "2025-06-13T18:30:00Z"
    assert daily["data"][1]["energy_wh"] == float(sum(i % 7 for i in range(26, 96)))
    assert daily["data"][0]["energy_wh"] == float(sum(i % 7 for i in range(26)))


async def test_month_and_week_buckets(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Europe/Amsterdam")))["id"]
        await _fill(client, system_id, datetime(2025, 2, 10, tzinfo=UTC), 24, 1.0)
        monthly = await _query(
            client,
            system_id,
            **{"from": "2025-02-10T00:00:00Z", "to": "2025-03-02T00:00:00Z", "interval": "1M"},
        )
        weekly = await _query(
            client,
            system_id,
            **{"from": "2025-02-12T12:00:00Z", "to": "2025-02-13T00:00:00Z", "interval": "1w"},
        )
    assert [(b["start"], b["end"]) for b in monthly["data"]] == [
        ("2025-01-31T23:00:00Z", "2025-02-28T23:00:00Z"),
        ("2025-02-28T23:00:00Z", "2025-03-31T22:00:00Z"),  # March loses an hour to DST
    ]
    assert [b["expected_samples"] for b in monthly["data"]] == [28 * 96, 31 * 96 - 4]
    assert monthly["data"][0]["energy_wh"] == 96.0
    assert monthly["data"][1]["energy_wh"] is None
    assert monthly["data"][1]["samples"] == 0
    # 2025-02-12 is a Wednesday; its ISO week starts Monday 2025-02-10 local.
    assert [(b["start"], b["end"]) for b in weekly["data"]] == [
        ("2025-02-09T23:00:00Z", "2025-02-16T23:00:00Z")
    ]
    assert weekly["data"][0]["energy_wh"] == 96.0


async def test_gaps_are_null_and_totals_null_without_readings(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(
            client, system_id, quarter_series(datetime(2025, 6, 15, 10, tzinfo=UTC), 4, 10, 400)
        )
        await upload(
            client, system_id, quarter_series(datetime(2025, 6, 15, 12, tzinfo=UTC), 2, 0.0, 0)
        )
        body = await _query(
            client,
            system_id,
            **{"from": "2025-06-15T10:00:00Z", "to": "2025-06-15T13:00:00Z", "interval": "1h"},
        )
        empty = await _query(
            client,
            system_id,
            **{"from": "2025-06-16T10:00:00Z", "to": "2025-06-16T12:00:00Z", "interval": "30m"},
        )
    assert body["data"] == [
        {
            "start": "2025-06-15T10:00:00Z",
            "end": "2025-06-15T11:00:00Z",
            "energy_wh": 40.0,
            "power_avg_w": 40.0,
            "power_max_w": 400.0,
            "samples": 4,
            "expected_samples": 4,
        },
        {
            "start": "2025-06-15T11:00:00Z",
            "end": "2025-06-15T12:00:00Z",
            "energy_wh": None,
            "power_avg_w": None,
            "power_max_w": None,
            "samples": 0,
            "expected_samples": 4,
        },
        # A night of zeros is data, not a gap.
        {
            "start": "2025-06-15T12:00:00Z",
            "end": "2025-06-15T13:00:00Z",
            "energy_wh": 0.0,
            "power_avg_w": 0.0,
            "power_max_w": 0.0,
            "samples": 2,
            "expected_samples": 4,
        },
    ]
    assert body["meta"]["totals"] == {
        "energy_wh": 40.0,
        "power_max_w": 400.0,
        "samples": 6,
        "expected_samples": 12,
    }
    assert len(empty["data"]) == 4
    assert all(b["energy_wh"] is None and b["samples"] == 0 for b in empty["data"])
    assert empty["meta"]["totals"] == {
        "energy_wh": None,
        "power_max_w": None,
        "samples": 0,
        "expected_samples": 8,
    }


async def test_range_is_widened_and_echoed(app: FastAPI, pro: Tenant, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
    async with client_for(app, enterprise.live) as client:
        body = await _query(
            client,
            system_id,
            **{
                "from": "2025-06-15T10:20:00Z",
                "to": "2025-06-15T11:05:00+00:00",
                "interval": "30m",
            },
        )
    assert body["meta"]["from"] == "2025-06-15T10:00:00Z"
    assert body["meta"]["to"] == "2025-06-15T11:30:00Z"
    assert body["meta"]["interval"] == "30m"
    assert body["meta"]["system_id"] == system_id
    assert [b["start"] for b in body["data"]] == [
        "2025-06-15T10:00:00Z",
        "2025-06-15T10:30:00Z",
        "2025-06-15T11:00:00Z",
    ]


async def test_defaults_are_the_last_24_hours_hourly(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        listed = await client.get("/api/v1/systems")
        assert listed.status_code == 200
    system = await _pro_system(app, pro)
    async with client_for(app, pro.live) as client:
        before = datetime.now(UTC)
        body = await _query(client, system.id)
        after = datetime.now(UTC)
    assert body["meta"]["interval"] == "1h"
    start = datetime.fromisoformat(body["meta"]["from"])
    end = datetime.fromisoformat(body["meta"]["to"])
    assert end - timedelta(hours=1) < after
    assert end >= before
    assert start <= before - timedelta(hours=24)
    assert len(body["data"]) in (24, 25)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"interval": "2x"}, "interval must be one of 15m, 30m, 1h, 1d, 1w, 1M; got '2x'"),
        ({"interval": "1H"}, "got '1H'"),
        ({"from": "2025-06-01T00:00:00"}, "from: '2025-06-01T00:00:00' has no time zone"),
        ({"to": "tomorrow"}, "to: 'tomorrow' is not an RFC 3339 timestamp"),
        (
            {"from": "2025-06-02T00:00:00Z", "to": "2025-06-01T00:00:00Z"},
            "'from' must be before 'to'",
        ),
        (
            {"from": "2025-06-01T00:00:00Z", "to": "2025-06-01T00:00:00Z"},
            "'from' must be before 'to'",
        ),
        ({"from": "1900-01-01T00:00:00Z", "to": "1901-01-01T00:00:00Z"}, "to: must lie"),
        (
            {"from": "2025-01-01T00:00:00Z", "to": "2025-05-01T00:00:00Z", "interval": "15m"},
            "the largest allowed 'to' is 2025-04-15T04:00:00Z",
        ),
        # 30 years with 8 leap days; 10,000 local days after 2000-01-01 is 2027-05-19 (CEST).
        (
            {
                "from": "2000-01-01T00:00:00+01:00",
                "to": "2030-01-01T00:00:00+01:00",
                "interval": "1d",
            },
            "holds 10,958 buckets of 1d, more than the 10,000 allowed per request; for "
            "from=1999-12-31T23:00:00Z the largest allowed 'to' is 2027-05-18T22:00:00Z",
        ),
    ],
)
async def test_query_validation(
    app: FastAPI, enterprise: Tenant, params: dict[str, str], message: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
    async with client_for(app, enterprise.live) as client:
        response = await client.get(f"/api/v1/systems/{system_id}/readings", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert message in response.json()["error"]


async def test_utc_grid_range_errors_come_before_the_system_lookup(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The contract's order of checks, 400 before 404: on the UTC grid the range is checked
    before the system is read (they are read together). Local-calendar buckets depend on the
    system's zone, so there the unknown system is what is reported."""
    too_many = {"from": "2025-01-01T00:00:00Z", "to": "2025-05-01T00:00:00Z"}
    async with client_for(app, enterprise.live) as client:
        utc_grid = await client.get(
            "/api/v1/systems/sys_missing/readings", params={**too_many, "interval": "15m"}
        )
        calendar = await client.get(
            "/api/v1/systems/sys_missing/readings",
            params={"from": "2000-01-01T00:00:00Z", "to": "2030-01-01T00:00:00Z", "interval": "1d"},
        )
        fine = await client.get("/api/v1/systems/sys_missing/readings", params={"interval": "15m"})
    assert utc_grid.status_code == 400, utc_grid.text
    assert "largest allowed 'to'" in utc_grid.json()["error"]
    assert calendar.status_code == 404, calendar.text
    assert fine.status_code == 404, fine.text
    assert fine.json() == {"error": "No system with id 'sys_missing'", "code": "not_found"}


async def test_exactly_ten_thousand_buckets_are_allowed(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        body = await _query(
            client,
            system_id,
            **{"from": "2025-01-01T00:00:00Z", "to": "2025-04-15T04:00:00Z", "interval": "15m"},
        )
    assert len(body["data"]) == 10_000


async def test_future_buckets_are_null(app: FastAPI, enterprise: Tenant) -> None:
    now = datetime.now(UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        body = await _query(
            client,
            system_id,
            **{
                "from": (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:00:00Z"),
                "to": (now + timedelta(days=2)).strftime("%Y-%m-%dT%H:00:00Z"),
            },
        )
    assert len(body["data"]) == 24
    assert {b["energy_wh"] for b in body["data"]} == {None}


async def test_rounding_to_three_decimals(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(
            client, system_id, quarter_series(datetime(2025, 6, 15, tzinfo=UTC), 3, 0.1234567)
        )
        body = await _query(
            client,
            system_id,
            **{"from": "2025-06-15T00:00:00Z", "to": "2025-06-15T01:00:00Z", "interval": "1h"},
        )
    bucket = body["data"][0]
    assert bucket["energy_wh"] == 0.37
    assert bucket["power_avg_w"] == 0.37


async def test_timezone_change_rebuilds_daily_buckets(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Europe/Amsterdam")))["id"]
        await _fill(client, system_id, datetime(2025, 6, 14, 20, tzinfo=UTC), 8, 1.0)
        patched = await client.patch(
            f"/api/v1/systems/{system_id}", json={"location": {"timezone": "UTC"}}
        )
        assert patched.status_code == 200
        body = await _query(
            client,
            system_id,
            **{"from": "2025-06-14T00:00:00Z", "to": "2025-06-16T00:00:00Z", "interval": "1d"},
        )
    assert [(b["start"], b["energy_wh"]) for b in body["data"]] == [
        ("2025-06-14T00:00:00Z", 16.0),
        ("2025-06-15T00:00:00Z", 16.0),
    ]


async def test_pro_reads_readings_of_own_system(app: FastAPI, pro: Tenant) -> None:
    system = await _pro_system(app, pro)
    async with client_for(app, pro.live) as client:
        readings = await client.get(f"/api/v1/systems/{system.id}/readings")
        summary = await client.get(f"/api/v1/systems/{system.id}/summary")
        single = await client.get(f"/api/v1/systems/{system.id}")
    assert readings.status_code == 200
    assert summary.status_code == 200
    assert single.json()["id"] == system.id


async def test_rollups_add_up_across_separate_uploads(app: FastAPI, enterprise: Tenant) -> None:
    """New quarter-hours are added to the hourly and daily rollups; the sums and the maximum
    power must equal what the raw quarter-hours give. (Tokyo: a whole-hour zone, whose 1h
    buckets are read from the hourly rollup.)"""
    start = datetime(2025, 6, 15, 10, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, **_tz_system("Asia/Tokyo", 35.7, 139.7)))["id"]
        # Interleaved quarter-hours of one hour and one local day, in three uploads; the
        # second has no power at all, the third the highest.
        first = quarter_series(start, 8, 10.0, 300.0)[::2]
        second = quarter_series(start + timedelta(minutes=15), 8, 20.5)[::2]
        third = quarter_series(start + timedelta(hours=2), 2, 1.25, 900.0)
        for batch in (first, second, third):
            assert (await upload(client, system_id, batch)).json()["updated"] == 0
        params = {"from": "2025-06-15T10:00:00Z", "to": "2025-06-15T13:00:00Z"}
        fine = await _query(client, system_id, **params, interval="15m")
        hourly = await _query(client, system_id, **params, interval="1h")
        daily = await _query(client, system_id, **params, interval="1d")
    expected = 4 * 10.0 + 4 * 20.5 + 2 * 1.25
    assert fine["meta"]["totals"]["energy_wh"] == expected
    assert [b["energy_wh"] for b in hourly["data"]] == [61.0, 61.0, 2.5]
    assert [b["power_max_w"] for b in hourly["data"]] == [300.0, 300.0, 900.0]
    assert [b["samples"] for b in hourly["data"]] == [4, 4, 2]
    assert daily["meta"]["totals"] == {
        "energy_wh": expected,
        "power_max_w": 900.0,
        "samples": 10,
        "expected_samples": 96,
    }
