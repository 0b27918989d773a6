"""End to end through other areas' endpoints: their changes appear as events with the object as
the API showed it, are delivered to a subscribed receiver, and Idempotency-Key holds on them."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from standardwebhooks import Webhook

import solarapi.webhooks.jobs  # noqa: F401 - registers the delivery job handler
from solarapi.events.types import DELIVERY_JOB_KIND as JOB_KIND
from solarapi.jobs.runner import run_pending
from solarapi.kit.timefmt import format_timestamp, utcnow
from tests.support import Tenant, client_for
from tests.webhooks.receiver import running_receiver

SYSTEM = {
    "name": "Rooftop Haarlem",
    "capacity_kwp": 8.4,
    "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
}


async def events_of(app: FastAPI, key: str) -> list[dict[str, Any]]:
    async with client_for(app, key) as client:
        response = await client.get("/api/v1/events")
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.json()["data"]
    return items


async def test_system_lifecycle_and_readings_emit_and_deliver(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    key = loopback_tenant.live
    with running_receiver() as receiver:
        async with client_for(loopback_app, key) as client:
            hook = await client.post(
                "/api/v1/webhooks",
                json={
                    "url": receiver.url,
                    "events": [
                        "system.created",
                        "system.updated",
                        "system.deleted",
                        "readings.uploaded",
                    ],
                },
            )
            secret = hook.json()["secret"]
            created = await client.post("/api/v1/systems", json=SYSTEM)
            assert created.status_code == 201, created.text
            system = created.json()
            updated = await client.patch(
                f"/api/v1/systems/{system['id']}", json={"name": "Rooftop Haarlem II"}
            )
            assert updated.status_code == 200, updated.text
            start = (utcnow() - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
            uploaded = await client.post(
                f"/api/v1/systems/{system['id']}/readings",
                json={"readings": [{"timestamp": format_timestamp(start), "energy_wh": 500.0}]},
            )
            assert uploaded.status_code == 200, uploaded.text
            deleted = await client.delete(f"/api/v1/systems/{system['id']}")
            assert deleted.status_code == 204

        events = list(reversed(await events_of(loopback_app, key)))
        assert [e["type"] for e in events] == [
            "system.created",
            "system.updated",
            "readings.uploaded",
            "system.deleted",
        ]
        assert events[0]["data"] == system
        assert events[1]["data"] == updated.json()
        assert events[2]["data"]["system_id"] == system["id"]
        assert events[2]["data"]["inserted"] == 1
        assert events[3]["data"]["id"] == system["id"]

        await run_pending(loopback_app.state.sessionmaker, "emitters", kinds={JOB_KIND})

    received = {r.headers["webhook-id"]: r for r in receiver.received}
    assert set(received) == {e["id"] for e in events}
    for event in events:
        request = received[event["id"]]
        assert Webhook(secret).verify(request.body, request.headers) == event


async def test_concurrent_duplicate_system_creation_makes_one_system(
    app: FastAPI, enterprise: Tenant
) -> None:
    key = f"create-{uuid.uuid4()}"
    async with client_for(app, enterprise.live) as client:
        responses = await asyncio.gather(
            *(
                client.post("/api/v1/systems", json=SYSTEM, headers={"Idempotency-Key": key})
                for _ in range(6)
            )
        )
        listed = await client.get("/api/v1/systems")
    assert {r.status_code for r in responses} <= {201, 409}
    ids = {r.json()["id"] for r in responses if r.status_code == 201}
    assert len(ids) == 1
    assert listed.json()["pagination"]["total"] == 1
    # One change, one event.
    events = await events_of(app, enterprise.live)
    assert [e["type"] for e in events] == ["system.created"]
