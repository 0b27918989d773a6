"""Events: the outbox (an event exists iff its change committed), GET /events, retention."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update

from solarapi.events.service import purge_expired, record_event
from solarapi.jobs.runner import run_pending
from solarapi.kit.timefmt import utcnow
from solarapi.models import Account
from solarapi.models.jobs import Job
from solarapi.models.webhooks import Event, WebhookDelivery
from tests.support import Tenant, client_for


class ForcedFailure(Exception):
    pass


async def emit(
    app: FastAPI,
    tenant: Tenant,
    event_type: str = "system.created",
    environment: str = "live",
    data: dict[str, object] | None = None,
) -> str:
    async with app.state.sessionmaker() as session, session.begin():
        return await record_event(
            session,
            account_id=tenant.account_id,
            environment=environment,
            event_type=event_type,
            data=data or {"id": "sys_X"},
        )


async def list_events(app: FastAPI, key: str, **params: object) -> dict[str, object]:
    async with client_for(app, key) as client:
        response = await client.get("/api/v1/events", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


async def count_events(app: FastAPI, account_id: str) -> int:
    async with app.state.sessionmaker() as session:
        total = await session.scalar(
            select(func.count()).select_from(Event).where(Event.account_id == account_id)
        )
    return int(total or 0)


async def test_event_exists_iff_its_change_committed(app: FastAPI, enterprise: Tenant) -> None:
    async def rename(name: str, fail: bool) -> None:
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(Account).where(Account.id == enterprise.account_id).values(name=name)
            )
            await record_event(
                session,
                account_id=enterprise.account_id,
                environment="live",
                event_type="system.updated",
                data={"name": name},
            )
            if fail:
                raise ForcedFailure("after the change and its event, before the commit")

    with pytest.raises(ForcedFailure):
        await rename("Renamed but rolled back", fail=True)
    async with app.state.sessionmaker() as session:
        account = await session.get(Account, enterprise.account_id)
    assert account is not None
    assert account.name != "Renamed but rolled back"
    assert await count_events(app, enterprise.account_id) == 0

    await rename("Renamed for real", fail=False)
    async with app.state.sessionmaker() as session:
        account = await session.get(Account, enterprise.account_id, populate_existing=True)
    assert account is not None
    assert account.name == "Renamed for real"
    body = await list_events(app, enterprise.live)
    assert [(e["type"], e["data"]) for e in body["data"]] == [  # type: ignore[index,union-attr]
        ("system.updated", {"name": "Renamed for real"})
    ]


async def test_delivery_jobs_share_the_event_transaction(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        created = await client.post(
            "/api/v1/webhooks",
            json={"url": "https://receiver.example.invalid/", "events": ["system.deleted"]},
        )
    endpoint_id = created.json()["id"]

    async def jobs_for_endpoint() -> int:
        async with app.state.sessionmaker() as session:
            jobs = (await session.scalars(select(Job).where(Job.kind == "webhook.deliver"))).all()
        return sum(1 for job in jobs if job.payload.get("endpoint_id") == endpoint_id)

    async def delete_then_fail() -> None:
        async with app.state.sessionmaker() as session, session.begin():
            await record_event(
                session,
                account_id=enterprise.account_id,
                environment="live",
                event_type="system.deleted",
                data={"id": "sys_GONE"},
            )
            raise ForcedFailure

    with pytest.raises(ForcedFailure):
        await delete_then_fail()
    assert await jobs_for_endpoint() == 0
    await emit(app, enterprise, "system.deleted")
    assert await jobs_for_endpoint() == 1
    # Leave no due job behind for other tests' runners: delete the endpoint, then let the
    # (now no-op) delivery job run.
    async with client_for(app, enterprise.live) as client:
        await client.delete(f"/api/v1/webhooks/{endpoint_id}")
    await run_pending(app.state.sessionmaker, "events-test", kinds={"webhook.deliver"})
    async with app.state.sessionmaker() as session:
        statuses = [
            job.status
            for job in (await session.scalars(select(Job).where(Job.kind == "webhook.deliver")))
            if job.payload.get("endpoint_id") == endpoint_id
        ]
    assert statuses == ["succeeded"]


async def test_list_shape_order_filter_and_pagination(app: FastAPI, enterprise: Tenant) -> None:
    first = await emit(app, enterprise, "system.created", data={"id": "sys_A"})
    second = await emit(app, enterprise, "readings.uploaded", data={"received": 96})
    third = await emit(app, enterprise, "system.created", data={"id": "sys_B"})

    body = await list_events(app, enterprise.live)
    items = body["data"]
    assert isinstance(items, list)
    assert [item["id"] for item in items] == [third, second, first]  # newest first
    event = items[0]
    assert set(event) == {"id", "type", "created_at", "environment", "data"}
    assert re.fullmatch(r"evt_[0-9A-Z]{26}", event["id"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["created_at"])
    assert event["environment"] == "live"
    assert event["data"] == {"id": "sys_B"}

    filtered = await list_events(app, enterprise.live, type="system.created")
    assert [item["id"] for item in filtered["data"]] == [third, first]  # type: ignore[union-attr]
    paged = await list_events(app, enterprise.live, limit=2, page=2)
    assert [item["id"] for item in paged["data"]] == [first]  # type: ignore[union-attr]
    assert paged["pagination"] == {
        "page": 2,
        "limit": 2,
        "total": 3,
        "total_pages": 2,
        "has_more": False,
    }


async def test_same_second_events_are_ordered_by_id(app: FastAPI, enterprise: Tenant) -> None:
    ids = [await emit(app, enterprise) for _ in range(5)]
    same = utcnow().replace(microsecond=0)
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(update(Event).where(Event.id.in_(ids)).values(created_at=same))
    body = await list_events(app, enterprise.live)
    assert [item["id"] for item in body["data"]] == sorted(ids, reverse=True)  # type: ignore[union-attr]


async def test_environment_and_tenant_isolation(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    live = await emit(app, enterprise, environment="live")
    test = await emit(app, enterprise, environment="test")
    await emit(app, pro)
    assert [e["id"] for e in (await list_events(app, enterprise.live))["data"]] == [live]  # type: ignore[union-attr]
    sandbox: list[dict[str, object]] = (await list_events(app, enterprise.test))["data"]  # type: ignore[assignment]
    # The sandbox's first use also provisions its simulated systems (system.created events).
    assert test in [e["id"] for e in sandbox]
    assert live not in [e["id"] for e in sandbox]
    assert {e["environment"] for e in sandbox} == {"test"}


async def test_invalid_filters(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        bad_type = await client.get("/api/v1/events", params={"type": "system.exploded"})
        bad_limit = await client.get("/api/v1/events", params={"limit": "101"})
    assert bad_type.status_code == 400
    assert bad_type.json()["code"] == "validation"
    assert "type must be one of report.completed" in bad_type.json()["error"]
    assert "got 'system.exploded'" in bad_type.json()["error"]
    assert bad_limit.status_code == 400


async def test_retention_hides_then_purges_old_events(app: FastAPI, enterprise: Tenant) -> None:
    old = await emit(app, enterprise)
    recent = await emit(app, enterprise)
    async with app.state.sessionmaker() as session, session.begin():
        await session.execute(
            update(Event)
            .where(Event.id == old)
            .values(created_at=utcnow() - timedelta(days=30, minutes=1))
        )
    body = await list_events(app, enterprise.live)
    assert [item["id"] for item in body["data"]] == [recent]  # type: ignore[union-attr]
    async with app.state.sessionmaker() as session, session.begin():
        purged = await purge_expired(session, utcnow())
    assert purged >= 1
    async with app.state.sessionmaker() as session:
        assert await session.get(Event, old) is None
        assert await session.get(Event, recent) is not None
        orphans = await session.scalar(
            select(func.count()).select_from(WebhookDelivery).where(WebhookDelivery.event_id == old)
        )
    assert orphans == 0


async def test_data_is_stored_as_the_api_shows_it(app: FastAPI, enterprise: Tenant) -> None:
    moment = datetime(2025, 6, 15, 14, 0, 5, 123456, tzinfo=UTC)
    await emit(app, enterprise, data={"created_at": moment, "nested": {"at": moment}, "n": 1.5})
    item = (await list_events(app, enterprise.live))["data"][0]  # type: ignore[index]
    assert item["data"] == {
        "created_at": "2025-06-15T14:00:05Z",
        "nested": {"at": "2025-06-15T14:00:05Z"},
        "n": 1.5,
    }


async def test_unknown_event_type_is_a_programming_error(app: FastAPI, enterprise: Tenant) -> None:
    with pytest.raises(ValueError, match=r"unknown event type 'system\.renamed'"):
        await emit(app, enterprise, "system.renamed")
    assert await count_events(app, enterprise.account_id) == 0
