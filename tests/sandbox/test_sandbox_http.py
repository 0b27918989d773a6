"""The sandbox through the HTTP API: provisioning, isolation and physical plausibility of the
simulated readings, served by the same readings, summary and aggregation code as live data."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from fastapi import FastAPI

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.kit.timefmt import utcnow
from solarapi.sandbox import model
from solarapi.sandbox.provision import ensure_sandbox
from tests.support import Tenant, client_for, make_tenant, served, settings_env

# The last whole calendar year: inside every sandbox's simulated history.
YEAR = utcnow().year - 1


def local_iso(tz: str, *args: int) -> str:
    return datetime(*args, tzinfo=ZoneInfo(tz)).isoformat()


async def sandbox_systems(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await client.get("/api/v1/systems")
    assert response.status_code == 200, response.text
    return {system["location"]["timezone"]: system for system in response.json()["data"]}


async def readings(
    client: httpx.AsyncClient, system_id: str, start: str, end: str, interval: str
) -> dict[str, Any]:
    response = await client.get(
        f"/api/v1/systems/{system_id}/readings",
        params={"from": start, "to": end, "interval": interval},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def by_month(body: dict[str, Any], tz: str) -> dict[int, float]:
    return {
        datetime.fromisoformat(bucket["start"]).astimezone(ZoneInfo(tz)).month: bucket["energy_wh"]
        for bucket in body["data"]
    }


async def year_by_month(client: httpx.AsyncClient, system: dict[str, Any]) -> dict[int, float]:
    tz = system["location"]["timezone"]
    body = await readings(
        client, system["id"], local_iso(tz, YEAR, 1, 1), local_iso(tz, YEAR + 1, 1, 1), "1M"
    )
    assert len(body["data"]) == 12
    return by_month(body, tz)


# --- provisioning and isolation ----------------------------------------------------------------


async def test_first_sandbox_request_provisions_three_simulated_systems(
    enterprise: Tenant, app: FastAPI
) -> None:
    async with client_for(app, enterprise.test) as client:
        systems = await sandbox_systems(client)
        again = await sandbox_systems(client)
    assert set(systems) == {"Europe/Amsterdam", "Europe/Berlin", "Australia/Sydney"}
    assert {s["id"] for s in again.values()} == {s["id"] for s in systems.values()}
    for system in systems.values():
        assert system["environment"] == "test"
        assert system["data_source"] == "simulated"
        assert system["status"] == "active"
    roof, park, sydney = (
        systems["Europe/Amsterdam"],
        systems["Europe/Berlin"],
        systems["Australia/Sydney"],
    )
    assert roof["market_zone"] == "NL"
    assert 7.0 <= roof["capacity_kwp"] <= 9.0
    assert roof["orientation"] == {"tilt_deg": 35.0, "azimuth_deg": 180.0}
    assert park["market_zone"] == "DE-LU"
    assert 700 <= park["capacity_kwp"] <= 800
    assert park["inverter_capacity_kw"] < park["capacity_kwp"]
    assert park["orientation"]["tilt_deg"] == 20.0
    assert sydney["market_zone"] is None
    assert sydney["orientation"]["azimuth_deg"] == 0.0
    assert 6.0 <= sydney["capacity_kwp"] <= 7.0


async def test_concurrent_first_requests_provision_once(app: FastAPI) -> None:
    tenant = await make_tenant(app, Plan.PRO)
    async with client_for(app, tenant.test) as client:
        responses = await asyncio.gather(*(client.get("/api/v1/systems") for _ in range(6)))
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        listed = await client.get("/api/v1/systems")
    assert listed.json()["pagination"]["total"] == 3


async def test_provisioning_is_idempotent_when_called_again(app: FastAPI) -> None:
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    for _ in range(2):
        async with app.state.sessionmaker() as session, session.begin():
            await ensure_sandbox(session, tenant.account_id, utcnow())
    async with client_for(app, tenant.test) as client:
        listed = await client.get("/api/v1/systems")
    assert listed.json()["pagination"]["total"] == 3


async def test_live_and_sandbox_never_see_each_other(enterprise: Tenant, app: FastAPI) -> None:
    async with (
        client_for(app, enterprise.test) as sandbox,
        client_for(app, enterprise.live) as live,
    ):
        sandbox_ids = {s["id"] for s in (await sandbox_systems(sandbox)).values()}
        created = await live.post(
            "/api/v1/systems",
            json={
                "name": "Live roof",
                "capacity_kwp": 5.0,
                "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
            },
        )
        assert created.status_code == 201, created.text
        live_id = created.json()["id"]
        assert created.json()["data_source"] == "metered"
        live_ids = {s["id"] for s in (await live.get("/api/v1/systems")).json()["data"]}
        assert live_ids == {live_id}
        assert live_id not in {s["id"] for s in (await sandbox_systems(sandbox)).values()}
        for sandbox_id in sandbox_ids:
            for path in ("", "/readings", "/summary"):
                response = await live.get(f"/api/v1/systems/{sandbox_id}{path}")
                assert response.status_code == 404, path
                assert response.json()["code"] == "not_found"
        for path in ("", "/readings", "/summary"):
            assert (await sandbox.get(f"/api/v1/systems/{live_id}{path}")).status_code == 404


async def test_a_system_created_in_the_sandbox_is_simulated_and_refuses_uploads(
    enterprise: Tenant, app: FastAPI
) -> None:
    async with client_for(app, enterprise.test) as client:
        created = await client.post(
            "/api/v1/systems",
            json={
                "name": "My test roof",
                "capacity_kwp": 4.0,
                "location": {"latitude": 48.1, "longitude": 11.6, "timezone": "Europe/Berlin"},
            },
        )
        assert created.status_code == 201, created.text
        system = created.json()
        assert system["data_source"] == "simulated"
        body = await readings(
            client,
            system["id"],
            local_iso("Europe/Berlin", YEAR, 6, 1),
            local_iso("Europe/Berlin", YEAR, 6, 8),
            "1d",
        )
        assert all(b["energy_wh"] > 0 and b["samples"] == 96 for b in body["data"])
        upload = await client.post(
            f"/api/v1/systems/{system['id']}/readings",
            json={"readings": [{"timestamp": f"{YEAR}-06-01T10:00:00Z", "energy_wh": 1.0}]},
        )
        assert upload.status_code == 409
        assert upload.json()["code"] == "conflict"


# --- physical plausibility -------------------------------------------------------------------


async def test_night_buckets_are_zero_not_null(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        systems = await sandbox_systems(client)
        for tz, night_hours in (
            ("Europe/Amsterdam", range(0, 4)),
            ("Australia/Sydney", range(21, 24)),
        ):
            body = await readings(
                client,
                systems[tz]["id"],
                local_iso(tz, YEAR, 6, 21),
                local_iso(tz, YEAR, 6, 22),
                "15m",
            )
            night = [
                b
                for b in body["data"]
                if datetime.fromisoformat(b["start"]).astimezone(ZoneInfo(tz)).hour in night_hours
            ]
            assert len(night) == 4 * len(night_hours)
            assert all(b["energy_wh"] == 0.0 and b["samples"] == 1 for b in night), night[:2]
            assert all(b["power_max_w"] == 0.0 for b in night)
            assert max(b["energy_wh"] for b in body["data"]) > 0


async def test_seasons_follow_the_hemisphere(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        systems = await sandbox_systems(client)
        dutch = await year_by_month(client, systems["Europe/Amsterdam"])
        sydney = await year_by_month(client, systems["Australia/Sydney"])
    assert 4.0 <= dutch[6] / dutch[12] <= 10.0, dutch
    assert sydney[12] > sydney[6], sydney


async def test_annual_yield_per_kwp_is_realistic(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        systems = await sandbox_systems(client)
        for tz, low, high in (
            ("Europe/Amsterdam", 800, 1100),
            ("Australia/Sydney", 1200, 1700),
            ("Europe/Berlin", 800, 1150),
        ):
            system = systems[tz]
            body = await readings(
                client,
                system["id"],
                local_iso(tz, YEAR, 1, 1),
                local_iso(tz, YEAR + 1, 1, 1),
                "1d",
            )
            assert len(body["data"]) == (date(YEAR + 1, 1, 1) - date(YEAR, 1, 1)).days
            total = body["meta"]["totals"]["energy_wh"]
            assert total == pytest.approx(sum(b["energy_wh"] for b in body["data"]), abs=1.0)
            per_kwp = total / 1000 / system["capacity_kwp"]
            assert low <= per_kwp <= high, (tz, per_kwp)


async def test_a_north_facing_copy_of_the_dutch_roof_produces_clearly_less(
    enterprise: Tenant, app: FastAPI
) -> None:
    async with client_for(app, enterprise.test) as client:
        south = (await sandbox_systems(client))["Europe/Amsterdam"]
        copy = {
            key: south[key]
            for key in ("capacity_kwp", "inverter_capacity_kw", "location", "market_zone")
        }
        copy["location"] = {k: v for k, v in south["location"].items() if v is not None}
        created = await client.post(
            "/api/v1/systems",
            json={
                **copy,
                "name": "North-facing copy",
                "orientation": {"tilt_deg": south["orientation"]["tilt_deg"], "azimuth_deg": 0.0},
            },
        )
        assert created.status_code == 201, created.text
        north = created.json()
        south_year = await year_by_month(client, south)
        north_year = await year_by_month(client, north)
    assert sum(north_year.values()) < 0.75 * sum(south_year.values())
    # Most visible in winter, when the sun stays low in the south.
    assert north_year[12] < 0.6 * south_year[12]


async def test_no_quarter_hour_power_above_the_inverter_limit(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        park = (await sandbox_systems(client))["Europe/Berlin"]
        limit_w = park["inverter_capacity_kw"] * 1000
        body = await readings(
            client, park["id"], f"{YEAR}-05-01T00:00:00Z", f"{YEAR}-08-01T00:00:00Z", "15m"
        )
    powers = [b["power_max_w"] for b in body["data"]]
    assert len(powers) == 92 * 96
    assert max(powers) <= limit_w
    # The park is sized to clip: the limit is reached, not merely respected.
    assert sum(1 for p in powers if p >= limit_w - 1) >= 10
    # Each quarter-hour's energy is its mean power for 15 minutes, so it is bounded too.
    assert max(b["energy_wh"] for b in body["data"]) <= limit_w / 4 + 0.001


@pytest.mark.parametrize(
    ("tz", "short_day", "long_day"),
    [
        ("Europe/Amsterdam", (3, 30), (10, 26)),
        ("Australia/Sydney", (10, 5), (4, 6)),
    ],
)
async def test_dst_days_have_92_and_100_quarter_hours(
    pro: Tenant, app: FastAPI, tz: str, short_day: tuple[int, int], long_day: tuple[int, int]
) -> None:
    """DST dates of 2025; other years' transitions fall on other dates, so pin the year."""
    async with client_for(app, pro.test) as client:
        system = (await sandbox_systems(client))[tz]
        for (month, day), count in ((short_day, 92), (long_day, 100)):
            body = await readings(
                client,
                system["id"],
                local_iso(tz, 2025, month, day),
                local_iso(tz, 2025, month, day, 12),
                "1d",
            )
            assert len(body["data"]) == 1
            bucket = body["data"][0]
            assert bucket["samples"] == bucket["expected_samples"] == count, bucket
            fine = await readings(client, system["id"], bucket["start"], bucket["end"], "15m")
            assert len(fine["data"]) == count
            assert sum(b["energy_wh"] for b in fine["data"]) == pytest.approx(
                bucket["energy_wh"], abs=0.01
            )


async def test_repeated_calls_return_identical_responses(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        system = (await sandbox_systems(client))["Australia/Sydney"]
        params = {
            "from": f"{YEAR}-03-01T00:00:00Z",
            "to": f"{YEAR}-04-01T00:00:00Z",
            "interval": "1h",
        }
        url = f"/api/v1/systems/{system['id']}/readings"
        first = await client.get(url, params=params)
        model.clear_cache()  # a cold recomputation gives the same bytes
        second = await client.get(url, params=params)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content


async def test_no_reading_after_now(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        systems = await sandbox_systems(client)
        now = utcnow()
        for system in systems.values():
            body = await readings(
                client,
                system["id"],
                (now - timedelta(hours=3)).isoformat(),
                (now + timedelta(hours=3)).isoformat(),
                "15m",
            )
            # Taken after the response, so a quarter-hour that ended meanwhile cannot fail it.
            later = utcnow()
            for bucket in body["data"]:
                end = datetime.fromisoformat(bucket["end"])
                start = datetime.fromisoformat(bucket["start"])
                if end > later:
                    assert bucket["energy_wh"] is None, bucket
                    assert bucket["samples"] == 0
                elif end <= now:
                    assert bucket["energy_wh"] is not None, bucket
                    assert bucket["samples"] == 1
                assert start < end
            summary = await client.get(f"/api/v1/systems/{system['id']}/summary")
            assert summary.status_code == 200
            last = summary.json()["last_reading_at"]
            assert last is not None
            assert datetime.fromisoformat(last) + timedelta(minutes=15) <= utcnow()
            assert datetime.fromisoformat(last) + timedelta(minutes=30) > now


async def test_summary_matches_the_readings(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        system = (await sandbox_systems(client))["Europe/Amsterdam"]
        summary = (await client.get(f"/api/v1/systems/{system['id']}/summary")).json()
        tz = ZoneInfo("Europe/Amsterdam")
        today = datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0)
        year_start = today.replace(month=1, day=1)
        body = await readings(
            client, system["id"], year_start.isoformat(), utcnow().isoformat(), "1M"
        )
    year_energy = body["meta"]["totals"]["energy_wh"]
    # The summary may have been taken a quarter-hour earlier than the readings.
    assert summary["energy_year_wh"] == pytest.approx(
        year_energy, abs=system["inverter_capacity_kw"] * 250
    )
    assert summary["energy_year_wh"] > 0


async def test_sandbox_market_prices_are_simulated(pro: Tenant, app: FastAPI) -> None:
    async with client_for(app, pro.test) as client:
        params = {
            "zone": "NL",
            "from": f"{YEAR}-07-01T00:00:00Z",
            "to": f"{YEAR}-07-02T00:00:00Z",
            "interval": "15m",
        }
        first = await client.get("/api/v1/market-prices", params=params)
        second = await client.get("/api/v1/market-prices", params=params)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["meta"]["source"] == "simulated"
    assert len(body["data"]) == 96
    assert all(b["price_eur_per_mwh"] is not None for b in body["data"])
    assert first.content == second.content


# --- across processes ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_two_server_processes_return_the_same_numbers(
    enterprise: Tenant, app: FastAPI, settings: Settings
) -> None:
    async with client_for(app, enterprise.test) as client:
        system = (await sandbox_systems(client))["Europe/Berlin"]
    path = f"/api/v1/systems/{system['id']}/readings"
    params = {"from": f"{YEAR}-06-01T00:00:00Z", "to": f"{YEAR}-06-08T00:00:00Z", "interval": "15m"}
    async with client_for(app, enterprise.test) as client:
        in_process = await client.get(path, params=params)
    env = settings_env(settings)
    headers = {"Authorization": f"Bearer {enterprise.test}"}
    bodies = []
    with served(env) as first, served(env) as second:
        for base in (first.base, second.base):
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=180) as http:
                response = await http.get(path, params=params)
                assert response.status_code == 200, response.text
                bodies.append(response.json())
    assert bodies[0] == bodies[1] == in_process.json()
    assert sum(b["energy_wh"] for b in bodies[0]["data"]) > 0


async def test_simulated_history_starts_in_2000_so_any_range_stays_cheap(
    enterprise: Tenant, app: FastAPI
) -> None:
    async with client_for(app, enterprise.test) as client:
        created = await client.post(
            "/api/v1/systems",
            json={
                "name": "No installation date",
                "capacity_kwp": 5.0,
                "location": {"latitude": 52.09, "longitude": 5.12, "timezone": "Europe/Amsterdam"},
            },
        )
        assert created.status_code == 201, created.text
        system = created.json()
        assert system["first_reading_at"] == "2000-01-01T00:00:00Z"
        body = await readings(
            client,
            system["id"],
            local_iso("Europe/Amsterdam", 1970, 2, 1),  # the API takes `from` ≥ 1970-01-01Z
            local_iso("Europe/Amsterdam", 2001, 1, 1),
            "1M",
        )
    data = body["data"]
    assert len(data) == 31 * 12 - 1
    before = [b for b in data if b["start"] < "1999-12-31T23:00:00Z"]
    assert len(before) == 30 * 12 - 1
    assert all(b["energy_wh"] is None for b in before)
    assert all(b["energy_wh"] is not None and b["energy_wh"] > 0 for b in data[-12:])


async def test_simulated_systems_report_first_and_last_reading_like_live_ones(
    enterprise: Tenant, app: FastAPI
) -> None:
    """first_reading_at: the installation day's local midnight (readings before it are null);
    last_reading_at: the start of the last quarter-hour that has ended."""
    async with client_for(app, enterprise.test) as client:
        systems = await sandbox_systems(client)
        for tz, system in systems.items():
            installed = date.fromisoformat(system["installed_on"])
            midnight = datetime(installed.year, installed.month, installed.day, tzinfo=ZoneInfo(tz))
            assert system["first_reading_at"] == midnight.astimezone(UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
            last = datetime.fromisoformat(system["last_reading_at"])
            assert last + timedelta(minutes=15) <= utcnow()
            assert last + timedelta(minutes=45) > utcnow()
            again = (await client.get(f"/api/v1/systems/{system['id']}")).json()
            assert again["first_reading_at"] == system["first_reading_at"]
            day_before = midnight - timedelta(days=1)
            body = await readings(
                client,
                system["id"],
                day_before.isoformat(),
                (midnight + timedelta(days=1)).isoformat(),
                "1d",
            )
            before, first_day = body["data"]
            assert (before["energy_wh"], before["samples"]) == (None, 0)
            assert first_day["energy_wh"] > 0
            assert first_day["samples"] == 24 * 4
        future = await client.post(
            "/api/v1/systems",
            json={
                "name": "Installed next year",
                "capacity_kwp": 5.0,
                "installed_on": f"{utcnow().year + 1}-06-01",
                "location": {"latitude": 52.09, "longitude": 5.12, "timezone": "Europe/Amsterdam"},
            },
        )
        assert future.status_code == 201, future.text
        assert (future.json()["first_reading_at"], future.json()["last_reading_at"]) == (None, None)
