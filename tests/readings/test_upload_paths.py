"""An upload of new quarter-hours is one statement on PostgreSQL, tried first with the system
as the worker last read it (`readings.upload`); everything else takes the general way. The
answers and what is stored must not depend on which way an upload took: a system changed
since the worker read it, an account with more webhook endpoints than the statement has
delivery ids, a re-upload. Both databases (SQLite always takes the general way)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from sqlalchemy import select

from solarapi.events.service import PREPARED_DELIVERIES
from solarapi.events.types import DELIVERY_JOB_KIND
from solarapi.jobs.kinds import ALERTS_EVALUATE
from solarapi.models.jobs import Job
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload
from tests.webhooks.test_endpoints import PUBLIC_URL

JUNE = datetime(2025, 6, 10, tzinfo=UTC)
SYDNEY = {"latitude": -33.87, "longitude": 151.21, "timezone": "Australia/Sydney"}


async def _jobs(app: FastAPI, kind: str) -> list[dict[str, Any]]:
    async with app.state.sessionmaker() as session:
        rows = await session.scalars(select(Job).where(Job.kind == kind))
        return [job.payload for job in rows]


async def test_a_capacity_lowered_since_the_last_upload_is_the_one_checked(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, capacity_kwp=10.0))["id"]
        first = await upload(client, system_id, quarter_series(JUNE, 4, 900.0))
        assert first.status_code == 200, first.text  # under 10 kWp's 3,750 Wh
        patched = await client.patch(f"/api/v1/systems/{system_id}", json={"capacity_kwp": 2.0})
        assert patched.status_code == 200, patched.text
        # 900 Wh is over 2 kWp's 750 Wh: the worker's kept 10 kWp must not let it through.
        refused = await upload(client, system_id, quarter_series(JUNE.replace(hour=6), 4, 900.0))
        assert refused.status_code == 400, refused.text
        assert "2.0 kWp" in refused.json()["error"]
        fits = await upload(client, system_id, quarter_series(JUNE.replace(hour=6), 4, 700.0))
        assert fits.json() == {"received": 4, "inserted": 4, "updated": 0}


async def test_days_follow_a_time_zone_changed_since_the_last_upload(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The second upload's quarter-hours lie on either side of Sydney's midnight: bucketed
    with the kept Amsterdam zone they would fall in one day."""
    late = datetime(2025, 6, 10, 13, 0, tzinfo=UTC)  # 23:00 in Sydney (AEST, +10)
    async with client_for(app, enterprise.live) as client:
        moved = (await create_system(client))["id"]  # Europe/Amsterdam
        born = (await create_system(client, location=SYDNEY))["id"]
        for system_id in (moved, born):
            response = await upload(client, system_id, quarter_series(JUNE, 4, 100.0))
            assert response.status_code == 200, response.text
        patched = await client.patch(f"/api/v1/systems/{moved}", json={"location": SYDNEY})
        assert patched.status_code == 200, patched.text
        days = {}
        for system_id in (moved, born):
            response = await upload(client, system_id, quarter_series(late, 8, 50.0))
            assert response.json() == {"received": 8, "inserted": 8, "updated": 0}
            readings = await client.get(
                f"/api/v1/systems/{system_id}/readings",
                params={
                    "from": "2025-06-09T00:00:00+10:00",
                    "to": "2025-06-13T00:00:00+10:00",
                    "interval": "1d",
                },
            )
            days[system_id] = [
                (bucket["start"], bucket["energy_wh"]) for bucket in readings.json()["data"]
            ]
        assert days[moved] == days[born]
        assert [energy for _, energy in days[born]] == [None, 400.0 + 200.0, 200.0, None]


async def test_every_subscribed_endpoint_gets_its_delivery(
    app: FastAPI, enterprise: Tenant
) -> None:
    """More endpoints than the one statement has delivery ids for: the general way queues
    them all; fewer: the statement does. Either way one job per endpoint, and one alert
    evaluation per upload."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        made: list[str] = []
        for count in (2, PREPARED_DELIVERIES + 1):
            while len(made) < count:
                created = await client.post(
                    "/api/v1/webhooks", json={"url": PUBLIC_URL, "events": ["readings.uploaded"]}
                )
                assert created.status_code == 201, created.text
                made.append(created.json()["id"])
            before = await _jobs(app, DELIVERY_JOB_KIND)
            hour = JUNE.replace(hour=count)
            response = await upload(client, system_id, quarter_series(hour, 4, 10.0))
            assert response.status_code == 200, response.text
            events = (await client.get("/api/v1/events")).json()["data"]
            event = next(e for e in events if e["type"] == "readings.uploaded")
            assert event["data"]["from"] == hour.strftime("%Y-%m-%dT%H:%M:%SZ")
            queued = [p for p in await _jobs(app, DELIVERY_JOB_KIND) if p not in before]
            assert sorted(p["endpoint_id"] for p in queued) == sorted(made)
            assert {(p["event_id"], p["attempt"]) for p in queued} == {(event["id"], 1)}
        evaluations = await _jobs(app, ALERTS_EVALUATE)
        assert evaluations.count({"system_id": system_id}) == 2


async def test_a_large_batch_stores_what_a_small_one_stores(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A large batch of new quarter-hours goes by COPY on PostgreSQL (rows encoded by numpy,
    a missing power as NULL), a small one in one statement: the readings, the rollups and
    the change feed must come out the same, and both go with their system."""
    from tests.changes.test_feed import follow

    count = 700  # over the COPY's threshold
    items = quarter_series(JUNE, count, 25.0)
    for i, item in enumerate(items):
        if i % 3:
            item["power_w"] = float(i)
    async with client_for(app, enterprise.live) as client:
        large = (await create_system(client))["id"]
        small = (await create_system(client))["id"]
        response = await upload(client, large, items)
        assert response.json() == {"received": count, "inserted": count, "updated": 0}
        for lo in range(0, count, 100):
            response = await upload(client, small, items[lo : lo + 100])
            assert response.status_code == 200, response.text
        rows, _ = await follow(client)
        by_system: dict[str, list[tuple[str, float, float | None]]] = {large: [], small: []}
        for row in rows:
            by_system[row["system_id"]].append((row["timestamp"], row["energy_wh"], row["power_w"]))
        expected = [(i["timestamp"], 25.0, i.get("power_w")) for i in items]
        assert sorted(by_system[large]) == sorted(expected)
        assert sorted(by_system[small]) == sorted(expected)
        for resolution in ("15m", "1h", "1d"):
            answers = [
                (
                    await client.get(
                        f"/api/v1/systems/{system_id}/readings",
                        params={
                            "from": "2025-06-10T00:00:00Z",
                            "to": "2025-06-18T00:00:00Z",
                            "resolution": resolution,
                        },
                    )
                ).json()["data"]
                for system_id in (large, small)
            ]
            assert answers[0] == answers[1]
            assert answers[0]
        deleted = await client.delete(f"/api/v1/systems/{large}")
        assert deleted.status_code == 204, deleted.text
        rows, _ = await follow(client)
        assert {row["system_id"] for row in rows} == {small}
