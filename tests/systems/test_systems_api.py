"""Systems over HTTP: CRUD, validation, plans, tenancy and pagination, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi import FastAPI

from solarapi.kit.plans import Plan
from tests.support import Tenant, client_for, make_tenant
from tests.systems.factories import create_system, quarter_series, system_body, upload


async def test_create_returns_object_location_and_defaults(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/systems",
            json={
                "name": "Shed",
                "capacity_kwp": 3.2,
                "location": {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
            },
        )
        assert response.status_code == 201, response.text
        body = response.json()
        assert response.headers["location"] == f"/api/v1/systems/{body['id']}"
        assert body["id"].startswith("sys_")
        assert body["environment"] == "live"
        assert body["data_source"] == "metered"
        assert body["status"] == "active"
        assert body["orientation"] == {"tilt_deg": 30.0, "azimuth_deg": 180.0}
        assert body["location"]["country"] is None
        assert body["inverter_capacity_kw"] is None
        assert body["market_zone"] is None
        assert body["installed_on"] is None
        assert body["first_reading_at"] is None
        assert body["last_reading_at"] is None
        assert body["created_at"].endswith("Z")
        assert body["created_at"] == body["updated_at"]
        fetched = await client.get(response.headers["location"])
    assert fetched.status_code == 200
    assert fetched.json() == body


async def test_southern_hemisphere_faces_north_by_default(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        body = await create_system(
            client,
            location={"latitude": -33.87, "longitude": 151.21, "timezone": "Australia/Sydney"},
            market_zone=None,
        )
    assert body["orientation"]["azimuth_deg"] == 0.0


async def test_sandbox_defaults_to_simulated_and_allows_metered(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.test) as client:
        simulated = await create_system(client)
        metered = await create_system(client, data_source="metered")
    assert (simulated["environment"], simulated["data_source"]) == ("test", "simulated")
    assert metered["data_source"] == "metered"


async def test_live_system_cannot_be_simulated(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post("/api/v1/systems", json=system_body(data_source="simulated"))
    assert response.status_code == 400
    assert response.json()["code"] == "validation"
    assert "data_source" in response.json()["error"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "   "}, "name: must not be blank"),
        ({"capacity_kwp": 0}, "capacity_kwp"),
        ({"capacity_kwp": 1_000_001}, "capacity_kwp"),
        ({"capacity_kwp": "8.4"}, "capacity_kwp"),
        ({"location": {"latitude": 91, "longitude": 4, "timezone": "UTC"}}, "location.latitude"),
        ({"location": {"latitude": 1, "longitude": -181, "timezone": "UTC"}}, "location.longitude"),
        ({"location": {"latitude": 1, "longitude": 1, "timezone": "Mars/Base"}}, "Mars/Base"),
        ({"location": {"latitude": 1, "longitude": 1}}, "location.timezone: is required"),
        (
            {"location": {"latitude": 1, "longitude": 1, "timezone": "Europe/" + "x" * 58}},
            "location.timezone: String should have at most 64 characters",
        ),
        ({"orientation": {"tilt_deg": 91}}, "orientation.tilt_deg"),
        ({"orientation": {"azimuth_deg": 360.5}}, "orientation.azimuth_deg"),
        ({"market_zone": "XX"}, "unknown market zone 'XX'"),
        ({"installed_on": "2023-13-01"}, "installed_on"),
        ({"status": "broken"}, "status"),
        ({"owner": "me"}, "owner: unknown field"),
    ],
)
async def test_create_validation(
    app: FastAPI, enterprise: Tenant, change: dict[str, object], needle: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post("/api/v1/systems", json=system_body(**change))
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert needle in response.json()["error"]


async def test_missing_required_fields_are_named(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post("/api/v1/systems", json={"name": "x"})
    assert response.status_code == 400
    assert "capacity_kwp: is required" in response.json()["error"]


async def test_patch_changes_only_given_fields(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        created = await create_system(client, installed_on="2023-04-01")
        response = await client.patch(
            f"/api/v1/systems/{created['id']}",
            json={"name": "Renamed", "location": {"country": None}, "market_zone": None},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["name"] == "Renamed"
        assert body["location"]["country"] is None
        assert body["location"]["timezone"] == "Europe/Amsterdam"
        assert body["market_zone"] is None
        assert body["installed_on"] == "2023-04-01"
        assert body["capacity_kwp"] == 8.4
        assert body["updated_at"] >= created["updated_at"]
        assert (await client.get(f"/api/v1/systems/{created['id']}")).json() == body


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"data_source": "simulated"}, "data_source: cannot be changed after creation"),
        ({"name": None}, "name: cannot be null"),
        ({"location": {"timezone": None}}, "location.timezone: cannot be null"),
        ({"location": {"timezone": "Nowhere/City"}}, "Nowhere/City"),
        ({"capacity_kwp": -1}, "capacity_kwp"),
    ],
)
async def test_patch_validation(
    app: FastAPI, enterprise: Tenant, patch: dict[str, object], needle: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        created = await create_system(client)
        response = await client.patch(f"/api/v1/systems/{created['id']}", json=patch)
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"]


async def test_delete_removes_system_and_readings(app: FastAPI, enterprise: Tenant) -> None:
    start = datetime(2025, 6, 1, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        created = await create_system(client)
        assert (await upload(client, created["id"], quarter_series(start, 8))).status_code == 200
        response = await client.delete(f"/api/v1/systems/{created['id']}")
        assert response.status_code == 204
        assert response.content == b""
        again = await client.get(f"/api/v1/systems/{created['id']}")
        readings = await client.get(f"/api/v1/systems/{created['id']}/readings")
        # A new system must not see anything of the deleted one's rows.
        recreated = await create_system(client)
        fresh = await client.get(
            f"/api/v1/systems/{recreated['id']}/readings",
            params={"from": "2025-06-01T00:00:00Z", "to": "2025-06-01T02:00:00Z"},
        )
    assert again.status_code == 404
    assert readings.status_code == 404
    assert fresh.json()["meta"]["totals"]["samples"] == 0
    async with app.state.sessionmaker() as session:
        from sqlalchemy import func, select

        from solarapi.models.readings import Reading, ReadingDay, ReadingHour

        for table in (Reading, ReadingHour, ReadingDay):
            count = await session.scalar(
                select(func.count()).select_from(table).where(table.system_id == created["id"])
            )
            assert count == 0


async def test_delete_refused_while_declarations_block_it(
    app: FastAPI, enterprise: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    import solarapi.declarations.service as declarations

    async def blocks(_session: object, system_id: str) -> bool:
        return system_id == blocked_id

    async with client_for(app, enterprise.live) as client:
        blocked_id = (await create_system(client))["id"]
        monkeypatch.setattr(declarations, "blocks_system_deletion", blocks)
        response = await client.delete(f"/api/v1/systems/{blocked_id}")
        still_there = await client.get(f"/api/v1/systems/{blocked_id}")
    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert "declaration" in response.json()["error"]
    assert still_there.status_code == 200


async def test_tenant_and_environment_isolation(app: FastAPI, enterprise: Tenant) -> None:
    other = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
    for key in (other.live, other.test, enterprise.test):
        async with client_for(app, key) as client:
            paths = [
                client.get(f"/api/v1/systems/{system_id}"),
                client.patch(f"/api/v1/systems/{system_id}", json={"name": "x"}),
                client.delete(f"/api/v1/systems/{system_id}"),
                client.get(f"/api/v1/systems/{system_id}/readings"),
                client.get(f"/api/v1/systems/{system_id}/summary"),
                upload(client, system_id, quarter_series(datetime(2025, 1, 1, tzinfo=UTC), 1)),
            ]
            for pending in paths:
                response = await pending
                assert response.status_code == 404, response.text
                assert response.json()["code"] == "not_found"
            listed = await client.get("/api/v1/systems")
            assert system_id not in [item["id"] for item in listed.json()["data"]]


async def test_pro_reads_but_cannot_write(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        assert (await client.get("/api/v1/systems")).status_code == 200
        response = await client.post("/api/v1/systems", json=system_body())
    assert response.status_code == 403
    assert "Enterprise" in response.json()["error"]


async def test_starter_has_no_access(app: FastAPI, starter: Tenant) -> None:
    async with client_for(app, starter.live) as client:
        response = await client.get("/api/v1/systems")
    assert response.status_code == 403


async def test_list_filters_order_and_pagination(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        made = [
            await create_system(client, name=f"s{i}", status=status, market_zone=zone)
            for i, (status, zone) in enumerate(
                [("active", "NL"), ("inactive", "NL"), ("active", "BE"), ("active", "NL")]
            )
        ]
        everything = (await client.get("/api/v1/systems")).json()
        first = await client.get("/api/v1/systems", params={"limit": 3})
        second = (await client.get("/api/v1/systems", params={"limit": 3, "page": 2})).json()
        past_end = (await client.get("/api/v1/systems", params={"limit": 3, "page": 9})).json()
        active_nl = (
            await client.get("/api/v1/systems", params={"status": "active", "market_zone": "NL"})
        ).json()
        # Past the end of a filtered list: the total is the filter's (read without a row).
        active_nl_past_end = (
            await client.get(
                "/api/v1/systems",
                params={"status": "active", "market_zone": "NL", "limit": 1, "page": 3},
            )
        ).json()
        bad_status = await client.get("/api/v1/systems", params={"status": "gone"})
        bad_zone = await client.get("/api/v1/systems", params={"market_zone": "ZZ"})
        bad_limit = await client.get("/api/v1/systems", params={"limit": 101})
    ids = [item["id"] for item in made]
    expected_order = [
        item["id"] for item in sorted(made, key=lambda item: (item["created_at"], item["id"]))
    ]
    assert [item["id"] for item in everything["data"]] == expected_order
    assert everything["pagination"] == {
        "page": 1,
        "limit": 50,
        "total": 4,
        "total_pages": 1,
        "has_more": False,
    }
    assert [item["id"] for item in first.json()["data"]] == expected_order[:3]
    assert first.json()["pagination"]["has_more"] is True
    assert 'rel="next"' in first.headers["link"]
    assert [item["id"] for item in second["data"]] == expected_order[3:]
    assert past_end["data"] == []
    assert past_end["pagination"]["total"] == 4
    assert sorted(item["id"] for item in active_nl["data"]) == sorted([ids[0], ids[3]])
    assert active_nl_past_end["data"] == []
    assert active_nl_past_end["pagination"] == {
        "page": 3,
        "limit": 1,
        "total": 2,
        "total_pages": 2,
        "has_more": False,
    }
    assert bad_status.status_code == 400
    assert "status must be one of" in bad_status.json()["error"]
    assert bad_zone.status_code == 400
    assert bad_limit.status_code == 400


async def test_first_and_last_reading_at_follow_uploads(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(datetime(2025, 6, 1, 10, tzinfo=UTC), 4))
        after_first = (await client.get(f"/api/v1/systems/{system_id}")).json()
        await upload(client, system_id, quarter_series(datetime(2025, 5, 1, 9, tzinfo=UTC), 1))
        await upload(client, system_id, quarter_series(datetime(2025, 6, 1, 10, tzinfo=UTC), 1))
        after_more = (await client.get(f"/api/v1/systems/{system_id}")).json()
    assert after_first["first_reading_at"] == "2025-06-01T10:00:00Z"
    assert after_first["last_reading_at"] == "2025-06-01T10:45:00Z"
    assert after_more["first_reading_at"] == "2025-05-01T09:00:00Z"
    assert after_more["last_reading_at"] == "2025-06-01T10:45:00Z"


async def test_patch_validation_comes_before_existence(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        invalid = await client.patch("/api/v1/systems/sys_unknown", json={"name": None})
        valid = await client.patch("/api/v1/systems/sys_unknown", json={"name": "x"})
    assert invalid.status_code == 400
    assert valid.status_code == 404


async def test_each_listed_system_is_exactly_its_own_answer(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The list reads its page in one statement with the timestamps formatted by the
    database (`db.api_time`), the single system through the ORM's types and Python's
    formatting: the same bytes for every kind of system — with and without readings and
    overrides, installed or not, simulated (sandbox), with fractions of a second in
    `created_at` (truncated alike)."""
    async with client_for(app, enterprise.live) as live, client_for(app, enterprise.test) as test:
        plain = await create_system(live, name="plain")
        tuned = await create_system(
            live,
            name="tuned",
            inverter_capacity_kw=4.5,
            installed_on="2024-03-01",
            market_zone="NL",
            model={"losses_pct": 9.5},
        )
        await upload(live, tuned["id"], quarter_series(datetime(2025, 6, 1, 10, tzinfo=UTC), 6))
        await create_system(test, name="simulated", installed_on="2025-01-15")
        await create_system(test, name="metered", data_source="metered")
        for client in (live, test):
            listed = await client.get("/api/v1/systems")
            assert listed.status_code == 200, listed.text
            items = listed.json()["data"]
            assert len(items) >= 2  # the sandbox holds its provisioned systems too
            for item in items:
                alone = await client.get(f"/api/v1/systems/{item['id']}")
                assert item == alone.json()
                # As bytes too: the item's own JSON inside the page's.
                assert alone.content in listed.content
        assert {item["id"] for item in (await live.get("/api/v1/systems")).json()["data"]} == {
            plain["id"],
            tuned["id"],
        }
