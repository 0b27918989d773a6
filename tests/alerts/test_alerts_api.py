"""Alerts through the API: the rules run as jobs after an upload, open one alert per system
and type, resolve, show in GET /alerts and are delivered as webhooks; the monitoring settings
of a system; on both databases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from standardwebhooks import Webhook

import solarapi.alerts.jobs
import solarapi.webhooks.jobs  # noqa: F401 - registers the delivery job handler
from solarapi.alerts import detectors, repository, service
from solarapi.alerts.jobs import schedule_sweep
from solarapi.alerts.sky import PROCESS_SKY, SKY_CACHE_DAYS, Site, sun_at
from solarapi.db import sessionmaker_for
from solarapi.events.types import DELIVERY_JOB_KIND
from solarapi.jobs.kinds import ALERTS_EVALUATE, ALERTS_SWEEP
from solarapi.jobs.queue import HANDLERS, PERIODIC_TASKS, enqueue
from solarapi.jobs.runner import load_handlers, run_pending
from solarapi.kit import cpu
from solarapi.kit.timefmt import utcnow
from solarapi.models.alerts import Alert
from solarapi.models.jobs import Job
from tests.dashboard.helpers import browser_for, log_in, text_of
from tests.support import Tenant, client_for
from tests.webhooks.receiver import running_receiver

HAARLEM = {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"}
# 2025-06-15: the sun stands 40–60° high over Haarlem from 08:00 to 14:00 UTC.
MORNING = datetime(2025, 6, 15, 8, 0, tzinfo=UTC)


def quarter_hours(start: datetime, energies: list[float]) -> list[dict[str, Any]]:
    return [
        {"timestamp": (start + timedelta(minutes=15 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
         "energy_wh": energy}
        for i, energy in enumerate(energies)
    ]  # fmt: skip


async def create_system(
    app: FastAPI, key: str, location: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    body = {"name": "Watched roof", "capacity_kwp": 8.0, "location": location or HAARLEM, **extra}
    async with client_for(app, key) as client:
        response = await client.post("/api/v1/systems", json=body)
    assert response.status_code == 201, response.text
    system: dict[str, Any] = response.json()
    return system


async def upload(app: FastAPI, key: str, system_id: str, readings: list[dict[str, Any]]) -> None:
    async with client_for(app, key) as client:
        response = await client.post(
            f"/api/v1/systems/{system_id}/readings", json={"readings": readings}
        )
    assert response.status_code == 200, response.text


async def evaluate(app: FastAPI, system_id: str, now: datetime) -> list[service.Change]:
    async with app.state.sessionmaker() as session, session.begin():
        return await service.evaluate_system(session, system_id, now)


async def alerts_of(app: FastAPI, key: str, **params: str) -> list[dict[str, Any]]:
    async with client_for(app, key) as client:
        response = await client.get("/api/v1/alerts", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]
    return items


def sunny_site_now(now: datetime) -> dict[str, Any]:
    """A place where the sun stands high right now and in the last hours: solar noon an hour
    ago, at the latitude the sun stands over today (so the test holds at any wall-clock time)."""
    hours = now.hour + now.minute / 60 - 1.0
    longitude = ((12.0 - hours) * 15.0 + 180.0) % 360.0 - 180.0
    day = now.timetuple().tm_yday
    latitude = 23.44 * float(np.sin(np.radians(360.0 * (day - 81) / 365.0)))
    return {"latitude": round(latitude, 2), "longitude": round(longitude, 2), "timezone": "UTC"}


# --- the rules, through uploads and the job runner --------------------------------------------


async def test_an_upload_queues_an_evaluation_that_opens_a_zero_production_alert(
    app: FastAPI, enterprise: Tenant
) -> None:
    now = utcnow()
    location = sunny_site_now(now)
    system = await create_system(app, enterprise.live, location)
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 15 + 150)
    # Two hours of production, then four quarter-hours at 0 Wh under a high sun.
    await upload(app, enterprise.live, system["id"], quarter_hours(start, [900.0] * 6 + [0.0] * 4))
    async with app.state.sessionmaker() as session:
        queued = await session.scalar(
            select(func.count()).select_from(Job).where(Job.kind == ALERTS_EVALUATE)
        )
    assert queued  # the request only queued it
    assert await alerts_of(app, enterprise.live, system_id=system["id"]) == []

    await run_pending(app.state.sessionmaker, "test-worker", kinds={ALERTS_EVALUATE})

    (alert,) = await alerts_of(app, enterprise.live, system_id=system["id"])
    assert alert["type"] == "system.zero_production"
    assert alert["status"] == "open"
    assert alert["resolved_at"] is None
    assert alert["environment"] == "live"
    assert alert["id"].startswith("alr_")
    assert alert["evidence"]["zero_quarter_hours"] == 4
    assert alert["evidence"]["min_sun_elevation_deg"] >= 15
    async with client_for(app, enterprise.live) as client:
        one = await client.get(f"/api/v1/alerts/{alert['id']}")
        events = await client.get("/api/v1/events", params={"type": "alert.opened"})
    assert one.status_code == 200
    assert one.json() == alert
    assert [event["data"] for event in events.json()["data"]] == [alert]


async def test_the_sky_cache_takes_its_size_from_the_runner_settings(
    app: FastAPI, enterprise: Tenant
) -> None:
    # SOLARAPI_ALERT_SKY_CACHE_DAYS: a runner whose settings say 7 keeps at most 7 site-days
    # (of the 38 or 39 an evaluation reads) and still finds what the full window shows.
    now = utcnow()
    system = await create_system(app, enterprise.live, sunny_site_now(now))
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 15 + 150)
    await upload(app, enterprise.live, system["id"], quarter_hours(start, [900.0] * 6 + [0.0] * 4))
    small = sessionmaker_for(
        app.state.engine, app.state.settings.model_copy(update={"alert_sky_cache_days": 7})
    )
    try:
        await run_pending(small, "test-worker", kinds={ALERTS_EVALUATE})
        assert PROCESS_SKY.max_days == 7
        assert 0 < len(PROCESS_SKY) <= 7
        (alert,) = await alerts_of(app, enterprise.live, system_id=system["id"])
        assert alert["type"] == "system.zero_production"
        # A runner with the default settings gives the cache its default size back.
        await enqueue_evaluation(app, system["id"])
        await run_pending(app.state.sessionmaker, "test-worker", kinds={ALERTS_EVALUATE})
        assert PROCESS_SKY.max_days == SKY_CACHE_DAYS == 16_384
        # Every site-day of the evaluation's window kept: its grid of HISTORY_DAYS days of
        # quarter-hours spans that many UTC days, one more unless it ends at midnight (an
        # evaluation in the first quarter-hour of a UTC day: this test failed then).
        assert len(PROCESS_SKY) >= detectors.HISTORY_DAYS
    finally:
        PROCESS_SKY.resize(SKY_CACHE_DAYS)


async def enqueue_evaluation(app: FastAPI, system_id: str) -> None:
    async with app.state.sessionmaker() as session, session.begin():
        await enqueue(session, ALERTS_EVALUATE, {"system_id": system_id})


async def test_zero_production_opens_once_and_resolves_on_production_under_the_same_sun(
    app: FastAPI, enterprise: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    await upload(
        app, enterprise.live, system["id"], quarter_hours(MORNING, [1500.0] * 4 + [0.0] * 4)
    )
    opened = await evaluate(app, system["id"], MORNING + timedelta(hours=2))
    assert [(change.alert.type, change.opened) for change in opened] == [
        ("system.zero_production", True)
    ]
    assert await evaluate(app, system["id"], MORNING + timedelta(hours=2)) == []  # idempotent

    await upload(
        app,
        enterprise.live,
        system["id"],
        quarter_hours(MORNING + timedelta(hours=2), [0.0, 1400.0]),
    )
    (resolved,) = await evaluate(app, system["id"], MORNING + timedelta(hours=2, minutes=30))
    assert resolved.opened is False
    (alert,) = await alerts_of(app, enterprise.live, system_id=system["id"])
    assert alert["status"] == "resolved"
    assert alert["resolved_at"] == "2025-06-15T10:30:00Z"
    assert alert["evidence"]["resolution"]["producing_quarter_hour"] == "2025-06-15T10:15:00Z"


async def test_in_an_api_process_the_rules_run_in_the_cpu_process_and_find_the_same(
    app: FastAPI, enterprise: Tenant
) -> None:
    # The API process's job runner sets cpu.OFF_LOOP: the sun, the clear sky and the rules
    # (pvlib, 15-220 ms holding the GIL) then run in the CPU process, not on the event loop
    # that answers requests. Two systems with the same readings: one judged here, one there.
    readings = quarter_hours(MORNING, [1500.0] * 4 + [0.0] * 4)
    here = await create_system(app, enterprise.live)
    there = await create_system(app, enterprise.live)
    for system in (here, there):
        await upload(app, enterprise.live, system["id"], readings)
    at = MORNING + timedelta(hours=2)
    in_loop = await evaluate(app, here["id"], at)
    PROCESS_SKY.clear()
    token = cpu.OFF_LOOP.set(True)
    try:
        off_loop = await evaluate(app, there["id"], at)
    finally:
        cpu.OFF_LOOP.reset(token)
        cpu.stop()
    assert len(PROCESS_SKY) == 0  # no sun computed in this process
    assert [(c.alert.type, c.opened, c.alert.evidence) for c in off_loop] == [
        (c.alert.type, c.opened, c.alert.evidence) for c in in_loop
    ]
    assert [c.alert.type for c in off_loop] == ["system.zero_production"]


async def test_three_zero_quarter_hours_or_zeros_at_a_low_sun_open_nothing(
    app: FastAPI, enterprise: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    await upload(
        app, enterprise.live, system["id"], quarter_hours(MORNING, [1500.0] * 4 + [0.0] * 3)
    )
    assert await evaluate(app, system["id"], MORNING + timedelta(hours=2)) == []
    # 03:00–05:00 UTC: sunrise over Haarlem, the sun below 15°: zeros there are not a fault.
    other = await create_system(app, enterprise.live)
    dawn = datetime(2025, 6, 15, 3, 0, tzinfo=UTC)
    await upload(app, enterprise.live, other["id"], quarter_hours(dawn, [0.0] * 8))
    changes = await evaluate(app, other["id"], dawn + timedelta(hours=2))
    assert [change.alert.type for change in changes] == []


async def test_offline_counts_daylight_hours_only(app: FastAPI, enterprise: Tenant) -> None:
    system = await create_system(app, enterprise.live)
    # Last reading at 19:45 UTC; the sun sets (below 5°) around 19:30 in June.
    evening = datetime(2025, 6, 15, 19, 0, tzinfo=UTC)
    await upload(app, enterprise.live, system["id"], quarter_hours(evening, [100.0] * 4))
    # Next morning 06:00 UTC: ten hours later, but only ~2 of them in daylight.
    assert await evaluate(app, system["id"], datetime(2025, 6, 16, 6, 0, tzinfo=UTC)) == []
    (opened,) = await evaluate(app, system["id"], datetime(2025, 6, 16, 9, 0, tzinfo=UTC))
    assert opened.opened
    assert opened.alert.type == "system.offline"
    evidence = opened.alert.evidence
    assert evidence["last_reading_at"] == "2025-06-15T19:45:00Z"
    assert 4 <= float(evidence["daylight_hours_since_last_reading"]) <= 5.5
    await upload(
        app,
        enterprise.live,
        system["id"],
        quarter_hours(datetime(2025, 6, 16, 8, 45, tzinfo=UTC), [900.0]),
    )
    (resolved,) = await evaluate(app, system["id"], datetime(2025, 6, 16, 9, 15, tzinfo=UTC))
    assert resolved.alert.type == "system.offline"
    assert not resolved.opened


async def test_a_daily_logger_with_offline_after_24_hours_is_not_flagged_between_batches(
    app: FastAPI, enterprise: Tenant
) -> None:
    system = await create_system(app, enterprise.live, monitoring={"offline_after_hours": 24})
    day = datetime(2025, 6, 15, 0, 0, tzinfo=UTC)
    await upload(app, enterprise.live, system["id"], quarter_hours(day, [100.0] * 96))
    # The whole next day's daylight (~17 h in June at 52° N) passes before the nightly upload.
    assert await evaluate(app, system["id"], datetime(2025, 6, 17, 1, 0, tzinfo=UTC)) == []


async def test_two_evaluations_at_once_open_one_alert(app: FastAPI, enterprise: Tenant) -> None:
    system = await create_system(app, enterprise.live)
    await upload(app, enterprise.live, system["id"], quarter_hours(MORNING, [0.0] * 8))
    now = MORNING + timedelta(hours=2)
    results = await asyncio.gather(*(evaluate(app, system["id"], now) for _ in range(4)))
    assert sum(len(changes) for changes in results) == 1
    async with app.state.sessionmaker() as session:
        count = await session.scalar(
            select(func.count()).select_from(Alert).where(Alert.system_id == system["id"])
        )
    assert count == 1
    async with client_for(app, enterprise.live) as client:
        events = await client.get("/api/v1/events", params={"type": "alert.opened"})
    assert len(events.json()["data"]) == 1


async def test_the_database_refuses_a_second_open_alert_of_a_type(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The index, not only the evaluation's lock: a second open alert of one type fails."""
    system = await create_system(app, enterprise.live)
    async with app.state.sessionmaker() as session, session.begin():
        await repository.insert_open(
            session, alert_id=f"alr_A{system['id'][-10:]}", account_id=enterprise.account_id,
            environment="live", system_id=system["id"], alert_type="system.offline",
            opened_at=MORNING, evidence={},
        )  # fmt: skip
    with pytest.raises(IntegrityError):
        async with app.state.sessionmaker() as session, session.begin():
            await repository.insert_open(
                session, alert_id=f"alr_B{system['id'][-10:]}", account_id=enterprise.account_id,
                environment="live", system_id=system["id"], alert_type="system.offline",
                opened_at=MORNING, evidence={},
            )  # fmt: skip
    # Once resolved, the next episode may open: the index covers open alerts only.
    async with app.state.sessionmaker() as session, session.begin():
        assert await repository.resolve(session, f"alr_A{system['id'][-10:]}", MORNING, {})
        await repository.insert_open(
            session, alert_id=f"alr_C{system['id'][-10:]}", account_id=enterprise.account_id,
            environment="live", system_id=system["id"], alert_type="system.offline",
            opened_at=MORNING, evidence={},
        )  # fmt: skip


async def test_alert_events_are_delivered_to_a_webhook(
    loopback_app: FastAPI, loopback_tenant: Tenant
) -> None:
    key = loopback_tenant.live
    with running_receiver() as receiver:
        async with client_for(loopback_app, key) as client:
            hook = await client.post(
                "/api/v1/webhooks",
                json={"url": receiver.url, "events": ["alert.opened", "alert.resolved"]},
            )
        assert hook.status_code == 201, hook.text
        system = await create_system(loopback_app, key)
        await upload(loopback_app, key, system["id"], quarter_hours(MORNING, [0.0] * 4))
        await evaluate(loopback_app, system["id"], MORNING + timedelta(hours=1))
        await upload(
            loopback_app, key, system["id"], quarter_hours(MORNING + timedelta(hours=1), [700.0])
        )
        await evaluate(loopback_app, system["id"], MORNING + timedelta(hours=1, minutes=15))
        await run_pending(loopback_app.state.sessionmaker, "test-worker", kinds={DELIVERY_JOB_KIND})
    verifier = Webhook(hook.json()["secret"])
    bodies = [verifier.verify(request.body, dict(request.headers)) for request in receiver.received]
    assert [body["type"] for body in bodies] == ["alert.opened", "alert.resolved"]
    assert {body["data"]["type"] for body in bodies} == {"system.zero_production"}
    assert bodies[1]["data"]["status"] == "resolved"


async def test_the_sweep_of_a_slot_is_queued_once_by_many_runners(app: FastAPI) -> None:
    moment = datetime(2031, 1, 1, 12, 7, tzinfo=UTC) + timedelta(
        seconds=np.random.randint(1, 10**8) * 900
    )
    results = await asyncio.gather(
        *(schedule_sweep(app.state.sessionmaker, moment) for _ in range(3))
    )
    assert sorted(results) == [False, False, True]
    assert await schedule_sweep(app.state.sessionmaker, moment + timedelta(minutes=1)) is False


# --- reading alerts -----------------------------------------------------------------------------


async def test_list_filters_orders_newest_first_and_pages(app: FastAPI, enterprise: Tenant) -> None:
    first = await create_system(app, enterprise.live)
    second = await create_system(app, enterprise.live)
    for system in (first, second):
        await upload(app, enterprise.live, system["id"], quarter_hours(MORNING, [0.0] * 4))
    await evaluate(app, first["id"], MORNING + timedelta(hours=1))
    await evaluate(app, second["id"], MORNING + timedelta(hours=2))  # opened later
    (offline,) = await evaluate(app, first["id"], MORNING + timedelta(hours=6))
    assert offline.alert.type == "system.offline"

    listed = await alerts_of(app, enterprise.live)
    assert [alert["opened_at"] for alert in listed] == sorted(
        (alert["opened_at"] for alert in listed), reverse=True
    )
    assert len(listed) == 3
    assert {a["type"] for a in await alerts_of(app, enterprise.live, type="system.offline")} == {
        "system.offline"
    }
    assert [
        a["system_id"] for a in await alerts_of(app, enterprise.live, system_id=second["id"])
    ] == [second["id"]]
    assert len(await alerts_of(app, enterprise.live, status="open")) == 3
    assert await alerts_of(app, enterprise.live, status="resolved") == []
    async with client_for(app, enterprise.live) as client:
        page = await client.get("/api/v1/alerts", params={"limit": 2, "page": 2})
    body = page.json()
    assert body["pagination"] == {
        "page": 2,
        "limit": 2,
        "total": 3,
        "total_pages": 2,
        "has_more": False,
    }
    assert len(body["data"]) == 1
    assert 'rel="first"' in page.headers["Link"]


async def test_bad_filters_are_400_and_other_tenants_alerts_404(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    await upload(app, enterprise.live, system["id"], quarter_hours(MORNING, [0.0] * 4))
    (change,) = await evaluate(app, system["id"], MORNING + timedelta(hours=1))
    async with client_for(app, enterprise.live) as client:
        bad_status = await client.get("/api/v1/alerts", params={"status": "closed"})
        bad_type = await client.get("/api/v1/alerts", params={"type": "system.on_fire"})
        other_env = await client.get(
            f"/api/v1/alerts/{change.alert.id}",
            headers={"Authorization": f"Bearer {enterprise.test}"},
        )
    assert bad_status.status_code == 400
    assert bad_status.json()["code"] == "validation"
    assert "open, resolved" in bad_status.json()["error"]
    assert bad_type.status_code == 400
    assert bad_type.json()["code"] == "validation"
    assert other_env.status_code == 404
    assert other_env.json()["code"] == "not_found"
    async with client_for(app, pro.live) as client:
        foreign = await client.get(f"/api/v1/alerts/{change.alert.id}")
        own = await client.get("/api/v1/alerts")
        # Filtering by another account's system is a 404 naming it, not an empty list.
        by_foreign_system = await client.get("/api/v1/alerts", params={"system_id": system["id"]})
    assert foreign.status_code == 404
    assert own.status_code == 200
    assert own.json()["data"] == []  # Pro reads alerts
    assert by_foreign_system.status_code == 404
    assert by_foreign_system.json() == {
        "error": f"No system with id '{system['id']}'",
        "code": "not_found",
    }
    async with client_for(app, enterprise.test) as client:
        other_environment = await client.get("/api/v1/alerts", params={"system_id": system["id"]})
        unknown = await client.get("/api/v1/alerts", params={"system_id": "sys_not_here"})
        # 400 before 404: a bad filter beside an unknown system is the 400.
        both = await client.get(
            "/api/v1/alerts", params={"system_id": "sys_not_here", "status": "closed"}
        )
    assert other_environment.status_code == 404
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "No system with id 'sys_not_here'"
    assert both.status_code == 400


# --- monitoring settings ------------------------------------------------------------------------


async def test_monitoring_settings_default_patch_and_range(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    assert system["monitoring"] == {
        "enabled": True, "offline_after_hours": 4, "underperformance_threshold": 0.8
    }  # fmt: skip
    path = f"/api/v1/systems/{system['id']}"
    async with client_for(app, enterprise.live) as client:
        changed = await client.patch(path, json={"monitoring": {"offline_after_hours": 24}})
        assert changed.status_code == 200, changed.text
        assert changed.json()["monitoring"] == {
            "enabled": True, "offline_after_hours": 24, "underperformance_threshold": 0.8
        }  # fmt: skip
        for bad in (
            {"offline_after_hours": 0},
            {"offline_after_hours": 169},
            {"offline_after_hours": "4"},
            {"underperformance_threshold": 0.05},
            {"underperformance_threshold": 1.5},
            {"enabled": None},
            {"sensitivity": 3},
        ):
            refused = await client.patch(path, json={"monitoring": bad})
            assert refused.status_code == 400, bad
            assert refused.json()["code"] == "validation"
        assert (await client.get(path)).json()["monitoring"]["offline_after_hours"] == 24
    async with client_for(app, pro.live) as client:
        forbidden = await client.patch(path, json={"monitoring": {"enabled": False}})
    assert forbidden.status_code in (403, 404)


async def test_switching_monitoring_off_resolves_open_alerts(
    app: FastAPI, enterprise: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    await upload(app, enterprise.live, system["id"], quarter_hours(MORNING, [0.0] * 4))
    await evaluate(app, system["id"], MORNING + timedelta(hours=1))
    async with client_for(app, enterprise.live) as client:
        response = await client.patch(
            f"/api/v1/systems/{system['id']}", json={"monitoring": {"enabled": False}}
        )
    assert response.status_code == 200
    (resolved,) = await evaluate(app, system["id"], MORNING + timedelta(hours=1))
    assert not resolved.opened
    assert resolved.alert.evidence["resolution"] == {"reason": "monitoring disabled"}


async def test_deleting_a_system_resolves_its_open_alerts_first(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A subscriber that opened an incident on `alert.opened` gets its `alert.resolved` when
    the system is deleted (with `system.deleted`), not an incident open for ever; the
    alerts then go with the system. Another system's open alert stays open."""
    system = await create_system(app, enterprise.live)
    other = await create_system(app, enterprise.live)
    for each in (system, other):
        await upload(app, enterprise.live, each["id"], quarter_hours(MORNING, [0.0] * 4))
        (opened,) = await evaluate(app, each["id"], MORNING + timedelta(hours=1))
        assert opened.opened
    async with client_for(app, enterprise.live) as client:
        listed = await client.get("/api/v1/alerts", params={"system_id": system["id"]})
        (alert,) = listed.json()["data"]
        deleted = await client.delete(f"/api/v1/systems/{system['id']}")
        assert deleted.status_code == 204, deleted.text
        events = (await client.get("/api/v1/events")).json()["data"]
        gone = await client.get(f"/api/v1/alerts/{alert['id']}")
        remaining = (await client.get("/api/v1/alerts")).json()["data"]
    # The deletion's two events (one transaction): the system's and its alert's.
    newest = {event["type"]: event["data"] for event in events[:2]}
    assert set(newest) == {"system.deleted", "alert.resolved"}
    assert newest["system.deleted"]["id"] == system["id"]
    resolved = newest["alert.resolved"]
    assert resolved["id"] == alert["id"]
    assert resolved["status"] == "resolved"
    assert resolved["system_id"] == system["id"]
    assert resolved["resolved_at"] is not None
    assert resolved["evidence"]["resolution"] == {"reason": "system deleted"}
    assert resolved["evidence"] == {**alert["evidence"], "resolution": {"reason": "system deleted"}}
    assert gone.status_code == 404
    assert [(a["system_id"], a["status"]) for a in remaining] == [(other["id"], "open")]


def test_the_sun_helper_puts_the_test_site_under_a_high_sun() -> None:
    now = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)
    location = sunny_site_now(now)
    site = Site(location["latitude"], location["longitude"], 30.0, 180.0, 1.0, None)
    starts = np.arange(int(now.timestamp()) - 3 * 3600, int(now.timestamp()), 900, dtype=np.int64)
    assert sun_at(site, starts).elevation_deg.min() > 40


async def test_the_dashboard_shows_open_alerts_on_the_overview_and_the_system_page(
    app: FastAPI, enterprise: Tenant
) -> None:
    quiet = await create_system(app, enterprise.live)
    broken = await create_system(app, enterprise.live)
    await upload(app, enterprise.live, broken["id"], quarter_hours(MORNING, [0.0] * 4))
    (change,) = await evaluate(app, broken["id"], MORNING + timedelta(hours=1))
    async with browser_for(app) as browser:
        await log_in(browser, enterprise.email, enterprise.password)
        overview = await browser.get("/overview")
        page = await browser.get(f"/systems/{broken['id']}")
        other = await browser.get(f"/systems/{quiet['id']}")
    assert overview.status_code == 200
    assert f'data-alert-id="{change.alert.id}"' in overview.text
    assert "No production in daylight" in text_of(overview)
    assert f'data-alert-id="{change.alert.id}"' in page.text
    assert "Open alerts" not in other.text


async def test_the_sweep_job_opens_offline_alerts_and_runners_load_it(
    app: FastAPI, enterprise: Tenant
) -> None:
    load_handlers()
    assert {ALERTS_EVALUATE, ALERTS_SWEEP} <= set(HANDLERS)
    assert "alerts.schedule_sweep" in PERIODIC_TASKS  # every runner, inline or worker, calls it
    system = await create_system(app, enterprise.live)
    await upload(app, enterprise.live, system["id"], quarter_hours(MORNING, [900.0] * 4))
    async with app.state.sessionmaker() as session, session.begin():
        await enqueue(session, ALERTS_SWEEP, {})
    await run_pending(app.state.sessionmaker, "test-worker", kinds={ALERTS_SWEEP})
    (alert,) = await alerts_of(app, enterprise.live, system_id=system["id"])
    assert alert["type"] == "system.offline"
    assert alert["evidence"]["last_reading_at"] == "2025-06-15T08:45:00Z"


async def test_underperformance_uses_measured_irradiance_when_the_system_has_it(
    app: FastAPI, enterprise: Tenant
) -> None:
    system = await create_system(app, enterprise.live)
    first = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)
    starts = np.arange(int(first.timestamp()), int(first.timestamp()) + 9 * 86400, 900)
    site = Site(HAARLEM["latitude"], HAARLEM["longitude"], 30.0, 180.0, 8.0, None)
    daylight = sun_at(site, starts.astype(np.int64)).elevation_deg > 5
    stamps = [datetime.fromtimestamp(int(s), UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for s in starts]
    readings = [
        {"timestamp": stamp, "energy_wh": 100.0 if day else 0.0}
        for stamp, day in zip(stamps, daylight, strict=True)
    ]
    irradiance = [
        {"timestamp": stamp, "poa_w_m2": 800.0}
        for stamp, day in zip(stamps, daylight, strict=True)
        if day
    ]
    await upload(app, enterprise.live, system["id"], readings)
    async with client_for(app, enterprise.live) as client:
        stored = await client.post(
            f"/api/v1/systems/{system['id']}/irradiance", json={"readings": irradiance}
        )
    assert stored.status_code == 200, stored.text
    changes = await evaluate(app, system["id"], first + timedelta(days=9))
    (alert,) = [c.alert for c in changes if c.alert.type == "system.underperforming"]
    assert alert.evidence["irradiance_source"] == "sensor"
    assert float(alert.evidence["energy_performance_index"]) < 0.2
    assert float(alert.evidence["coverage"]) >= 0.95
