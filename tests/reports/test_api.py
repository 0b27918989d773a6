"""Report endpoints: validation, plans, tenancy, listing, deletion, failure and expiry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import update

from solarapi.jobs import repository as jobs_repository
from solarapi.jobs.runner import run_pending
from solarapi.kit.timefmt import utcnow
from solarapi.models.reports import Report
from solarapi.reports import jobs as report_jobs
from solarapi.reports.service import JOB_KIND
from tests.reports.helpers import (
    JUNE_1,
    completed,
    create_report,
    in_thread,
    make_system,
    run_report_jobs,
    upload_readings,
)
from tests.support import Tenant, client_for

PERIOD = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"}


async def one_system(client: Any) -> dict[str, Any]:
    system = await make_system(client, "Roof", "Europe/Amsterdam", market_zone="NL")
    await upload_readings(client, system, JUNE_1, 96)
    return system


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "sales", "format": "csv", **PERIOD},
         "type must be one of production, market_value, declarations; got 'sales'"),
        ({"type": "production", "format": "xlsx", **PERIOD},
         "format must be one of csv, pdf; got 'xlsx'"),
        ({"type": "production", "format": "csv", "to": PERIOD["to"]},
         "from is required: an RFC 3339 timestamp with a zone, such as 2025-06-01T00:00:00Z"),
        ({"type": "production", "format": "csv", "from": PERIOD["from"]},
         "to is required: an RFC 3339 timestamp with a zone, such as 2025-06-01T00:00:00Z"),
        ({"type": "production", "format": "csv", "from": "2025-06-01T00:00:00",
          "to": PERIOD["to"]}, "from: '2025-06-01T00:00:00' has no time zone"),
        ({"type": "production", "format": "csv", "interval": "2x", **PERIOD},
         "interval must be one of 15m, 30m, 1h, 1d, 1w, 1M; got '2x'"),
        ({"type": "production", "format": "csv", "from": PERIOD["to"], "to": PERIOD["from"]},
         "'from' must be before 'to'"),
        ({"type": "production", "format": "csv", "from": "2020-01-01T00:00:00Z",
          "to": "2025-01-01T00:00:00Z", "interval": "15m"}, "more than the 10,000 allowed"),
        ({"type": "production", "format": "csv", "system_ids": [], **PERIOD},
         "system_ids must name at least one system"),
        ({"type": "production", "format": "csv", "system_ids": ["sys_a", "sys_a"], **PERIOD},
         "system_ids[1]: 'sys_a' is listed twice"),
        ({"type": "declarations", "format": "csv", "interval": "1d", **PERIOD},
         "interval does not apply to declarations reports"),
        # 10,001 UTC days, within two of the cap: a declarations report has no calendar of
        # buckets to judge it, so the UTC calendar's rule stands.
        ({"type": "declarations", "format": "csv", "from": "1990-01-01T00:00:00Z",
          "to": "2017-05-20T00:00:00Z"}, "more than the 10,000 allowed"),
        ({"type": "production", "format": "csv", "colour": "red", **PERIOD}, "colour"),
    ],
)  # fmt: skip
async def test_invalid_parameters_are_refused_at_post_time(
    app: FastAPI, enterprise: Tenant, body: dict[str, Any], message: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        response = await client.post("/api/v1/reports", json=body)
        listed = (await client.get("/api/v1/reports")).json()
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert message in response.json()["error"]
    assert listed["pagination"]["total"] == 0  # nothing was queued


async def test_plans_and_tenancy(
    app: FastAPI, enterprise: Tenant, pro: Tenant, starter: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await one_system(client)
        report = await create_report(client, type="production", format="csv", **PERIOD)
        test_env = (await client.get(f"/api/v1/reports/{report['id']}", headers={
            "Authorization": f"Bearer {enterprise.test}"})).status_code  # fmt: skip
    other = await _other_enterprise(app)
    async with client_for(app, other.live) as client:
        for method, path in [
            ("GET", f"/api/v1/reports/{report['id']}"),
            ("GET", f"/api/v1/reports/{report['id']}/download"),
            ("DELETE", f"/api/v1/reports/{report['id']}"),
        ]:
            response = await client.request(method, path)
            assert response.status_code == 404, (method, path)
            assert response.json()["code"] == "not_found"
        foreign = await client.post(
            "/api/v1/reports",
            json={"type": "production", "format": "csv", "system_ids": [system["id"]], **PERIOD},
        )
        assert foreign.status_code == 404
        assert foreign.json()["error"] == f"No system with id '{system['id']}'"
        assert (await client.get("/api/v1/reports")).json()["pagination"]["total"] == 0
    assert test_env == 404  # the sandbox does not see live reports
    for tenant, expected in ((pro, 403), (starter, 403)):
        async with client_for(app, tenant.live) as client:
            for method, path in [("GET", "/api/v1/reports"), ("POST", "/api/v1/reports"),
                                 ("GET", f"/api/v1/reports/{report['id']}/download")]:  # fmt: skip
                response = await client.request(method, path, json={} if method == "POST" else None)
                assert response.status_code == expected, (tenant.plan, method, path)
                assert response.json()["code"] == "forbidden"
    async with client_for(app, pro.live) as client:
        message = (await client.get("/api/v1/reports")).json()["error"]
    assert message.startswith("Reports require the Enterprise plan")


async def _other_enterprise(app: FastAPI) -> Tenant:
    from solarapi.kit.plans import Plan
    from tests.support import make_tenant

    return await make_tenant(app, Plan.ENTERPRISE)


async def test_market_value_of_a_system_without_zone_is_a_conflict(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        plain = await make_system(client, "No zone", "Europe/Amsterdam")
        explicit = await client.post(
            "/api/v1/reports",
            json={"type": "market_value", "format": "csv", "system_ids": [plain["id"]], **PERIOD},
        )
        default = await client.post(
            "/api/v1/reports", json={"type": "market_value", "format": "csv", **PERIOD}
        )
    assert explicit.status_code == 409
    assert f"system {plain['id']} has no market_zone" in explicit.json()["error"]
    assert default.status_code == 409
    assert "none of this environment's systems has a market_zone" in default.json()["error"]


async def test_no_systems_is_a_conflict(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        response = await client.post(
            "/api/v1/reports", json={"type": "production", "format": "csv", **PERIOD}
        )
    assert response.status_code == 409
    assert "no systems in its live environment" in response.json()["error"]


async def test_list_filters_and_order(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        first = await create_report(client, type="production", format="csv", **PERIOD)
        second = await create_report(client, type="market_value", format="pdf", **PERIOD)
        third = await create_report(client, type="production", format="pdf", **PERIOD)
        await completed(client, app, first["id"])
        everything = (await client.get("/api/v1/reports")).json()
        production = (await client.get("/api/v1/reports", params={"type": "production"})).json()
        done = (await client.get("/api/v1/reports", params={"status": "completed"})).json()
        paged = await client.get("/api/v1/reports", params={"limit": 2, "page": 2})
        bad = await client.get("/api/v1/reports", params={"status": "done"})
    ids = [item["id"] for item in everything["data"]]
    # created_at descending, then id descending (ULIDs grow, so newest first either way).
    assert ids == [third["id"], second["id"], first["id"]]
    assert [item["id"] for item in production["data"]] == [third["id"], first["id"]]
    assert {item["status"] for item in done["data"]} == {"completed"}
    assert first["id"] in [item["id"] for item in done["data"]]
    assert paged.json()["data"][0]["id"] == first["id"]
    assert paged.json()["pagination"] == {
        "page": 2, "limit": 2, "total": 3, "total_pages": 2, "has_more": False,
    }  # fmt: skip
    assert 'rel="first"' in paged.headers["link"]
    assert bad.status_code == 400
    assert bad.json()["error"] == (
        "status must be one of queued, running, completed, failed; got 'done'"
    )


async def test_delete_cancels_a_queued_report(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="csv", **PERIOD)
        async with app.state.sessionmaker() as session:
            job_id = (await session.get(Report, report["id"])).job_id  # type: ignore[union-attr]
        deleted = await client.delete(f"/api/v1/reports/{report['id']}")
        again = await client.get(f"/api/v1/reports/{report['id']}")
        await run_report_jobs(app)
    assert deleted.status_code == 204
    assert again.status_code == 404
    async with app.state.sessionmaker() as session:
        job = await jobs_repository.get_job(session, job_id)
    assert job is not None
    assert job.status == "cancelled"
    assert job.attempts == 0  # never ran


async def test_delete_of_a_completed_report_removes_its_file(
    app: FastAPI, enterprise: Tenant
) -> None:
    reports_dir = app.state.settings.effective_reports_dir
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="csv", **PERIOD)
        await completed(client, app, report["id"])
        async with app.state.sessionmaker() as session:
            name = (await session.get(Report, report["id"])).file_name  # type: ignore[union-attr]
        assert (reports_dir / name).is_file()
        assert (await client.delete(f"/api/v1/reports/{report['id']}")).status_code == 204
    assert not (reports_dir / name).exists()


async def test_expired_report_is_404_and_its_file_is_removed(
    app: FastAPI, enterprise: Tenant
) -> None:
    reports_dir = app.state.settings.effective_reports_dir
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="pdf", **PERIOD)
        done = await completed(client, app, report["id"])
        completed_at = done["completed_at"]
        expires_at = done["expires_at"]
        async with app.state.sessionmaker() as session:
            stored = await session.get(Report, report["id"])
            assert stored is not None
            name = stored.file_name
            assert stored.expires_at - stored.completed_at == timedelta(days=7)  # type: ignore[operator]
        assert (await client.get(done["download_url"])).status_code == 200
        # Seven days pass: move the report's clock back instead of the world's forward.
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(Report)
                .where(Report.id == report["id"])
                .values(
                    completed_at=utcnow() - timedelta(days=7, seconds=5),
                    expires_at=utcnow() - timedelta(seconds=5),
                )
            )
        expired = await client.get(f"/api/v1/reports/{report['id']}/download")
        shown = (await client.get(f"/api/v1/reports/{report['id']}")).json()
        assert (reports_dir / name).is_file()  # the clean-up has not run yet; 404 anyway
        removed = await report_jobs.remove_expired_files(app.state.sessionmaker, utcnow())
        after = await client.get(f"/api/v1/reports/{report['id']}/download")
    assert completed_at < expires_at
    assert expired.status_code == 404
    assert expired.json()["code"] == "not_found"
    assert "expired" in expired.json()["error"]
    assert shown["status"] == "completed"
    assert shown["file"] is None
    assert shown["download_url"] is None
    assert removed >= 1
    assert not (reports_dir / name).exists()
    assert after.status_code == 404


async def test_report_of_a_deleted_system_fails_with_a_message(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await one_system(client)
        report = await create_report(client, type="production", format="csv", **PERIOD)
        assert (await client.delete(f"/api/v1/systems/{system['id']}")).status_code == 204
        await run_report_jobs(app)
        failed = (await client.get(f"/api/v1/reports/{report['id']}")).json()
        download = await client.get(f"/api/v1/reports/{report['id']}/download")
    assert failed["status"] == "failed"
    assert failed["error"] == (
        f"system {system['id']} was deleted after the report was requested; request the "
        "report again without it"
    )
    assert failed["file"] is None
    assert download.status_code == 409
    assert "failed" in download.json()["error"]


async def test_a_crashing_generator_is_retried_then_fails(
    app: FastAPI, enterprise: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_renderer(*_args: object) -> None:
        raise MemoryError("renderer ran out of memory")

    monkeypatch.setattr(report_jobs, "render", broken_renderer)
    monkeypatch.setattr(report_jobs, "run_in_process", in_thread)
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="pdf", **PERIOD)
        async with app.state.sessionmaker() as session:
            job_id = (await session.get(Report, report["id"])).job_id  # type: ignore[union-attr]
        await run_report_jobs(app)
        between = (await client.get(f"/api/v1/reports/{report['id']}")).json()
        for hours in (1, 2):
            later = utcnow() + timedelta(hours=hours)
            await run_pending(
                app.state.sessionmaker, "t", kinds={JOB_KIND}, clock=lambda t=later: t
            )
        failed = (await client.get(f"/api/v1/reports/{report['id']}")).json()
    async with app.state.sessionmaker() as session:
        job = await jobs_repository.get_job(session, job_id)
    assert between["status"] == "running"  # waiting for its retry
    assert between["error"] is None
    assert failed["status"] == "failed"
    assert failed["error"] == (
        "the report could not be generated because of an internal error (3 attempts); "
        f"request it again, or contact support quoting {report['id']}"
    )
    assert "MemoryError" not in failed["error"]
    assert job is not None
    assert (job.status, job.attempts) == ("failed", 3)
    assert job.last_error == "MemoryError: renderer ran out of memory"
    leftovers = list(app.state.settings.effective_reports_dir.glob(f"*{report['id']}*"))
    assert leftovers == []


async def test_completion_and_failure_are_recorded_as_events(
    app: FastAPI, enterprise: Tenant
) -> None:
    from sqlalchemy import select

    from solarapi.models.webhooks import Event, EventType

    # Every report.* event type (the column takes members only, so no LIKE pattern).
    report_events = [member for member in EventType if member.startswith("report.")]
    async with client_for(app, enterprise.live) as client:
        system = await one_system(client)
        good = await create_report(client, type="production", format="csv", **PERIOD)
        shown = await completed(client, app, good["id"])
        bad = await create_report(client, type="production", format="csv", **PERIOD)
        assert (await client.delete(f"/api/v1/systems/{system['id']}")).status_code == 204
        await run_report_jobs(app)
        failed = (await client.get(f"/api/v1/reports/{bad['id']}")).json()
    async with app.state.sessionmaker() as session:
        events = (
            await session.scalars(
                select(Event)
                .where(Event.account_id == enterprise.account_id, Event.type.in_(report_events))
                .order_by(Event.created_at)
            )
        ).all()
    assert [(event.type, event.data["id"]) for event in events] == [
        ("report.completed", good["id"]),
        ("report.failed", bad["id"]),
    ]
    assert events[0].data == shown  # the report object as the API shows it
    assert events[0].environment == "live"
    assert events[1].data["error"] == failed["error"]


async def test_orphaned_files_are_removed_after_a_day(app: FastAPI, enterprise: Tenant) -> None:
    import os

    reports_dir = app.state.settings.effective_reports_dir
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="csv", **PERIOD)
        await completed(client, app, report["id"])
    async with app.state.sessionmaker() as session:
        kept = reports_dir / (await session.get(Report, report["id"])).file_name  # type: ignore[union-attr, operator]
    killed = reports_dir / f"{report['id']}-0.csv"  # as left by an attempt killed mid-write
    partial = reports_dir / f".{report['id']}-9.pdf.partial"
    fresh = reports_dir / "rpt_01ZZZZZZZZZZZZZZZZZZZZZZZZ-1.csv"
    for path in (killed, partial, fresh):
        path.write_bytes(b"x")
    two_days_ago = (utcnow() - timedelta(days=2)).timestamp()
    for path in (kept, killed, partial):
        os.utime(path, (two_days_ago, two_days_ago))
    removed = await report_jobs.remove_orphan_files(app.state.sessionmaker, utcnow())
    assert removed >= 2
    assert kept.is_file()  # a report refers to it
    assert fresh.is_file()  # too young: an attempt may still be writing it
    assert not killed.exists()
    assert not partial.exists()
    fresh.unlink()


async def test_deleting_a_running_report_stops_it_and_leaves_no_file(
    app: FastAPI, enterprise: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import threading
    import time

    from solarapi.jobs.runner import RunnerSettings, execute
    from tests.jobs.handlers import claim_job

    real_render = report_jobs.render
    rendering = threading.Event()
    proceed = threading.Event()
    rendered = threading.Event()

    def slow_render(*args: Any) -> None:
        rendering.set()
        # Held until the report is deleted and its job has let go.
        proceed.wait(120)
        try:
            real_render(*args)
        finally:
            rendered.set()

    monkeypatch.setattr(report_jobs, "render", slow_render)
    monkeypatch.setattr(report_jobs, "run_in_process", in_thread)
    settings = RunnerSettings(lease_seconds=0.6)
    reports_dir = app.state.settings.effective_reports_dir
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="pdf", **PERIOD)
        async with app.state.sessionmaker() as session:
            job_id = (await session.get(Report, report["id"])).job_id  # type: ignore[union-attr]
        claimed = await claim_job(
            app.state.sessionmaker, job_id, worker_id="w1", kind=JOB_KIND, now=utcnow(),
            lease=settings.lease,
        )  # fmt: skip
        running = asyncio.create_task(execute(app.state.sessionmaker, claimed, "w1", settings))
        while not rendering.is_set():
            await asyncio.sleep(0.05)
        assert (await client.get(f"/api/v1/reports/{report['id']}")).json()["status"] == "running"
        assert (await client.delete(f"/api/v1/reports/{report['id']}")).status_code == 204
        outcome = await asyncio.wait_for(running, timeout=120)
        proceed.set()
        # The rendering thread runs to its end (a thread cannot be stopped) and drops its work.
        assert await asyncio.to_thread(rendered.wait, 120)
        deadline = time.monotonic() + 60
        while list(reports_dir.glob(f"*{report['id']}*")):
            assert time.monotonic() < deadline, "the abandoned file was not removed"
            await asyncio.sleep(0.05)
    async with app.state.sessionmaker() as session:
        job = await jobs_repository.get_job(session, job_id)
    assert outcome == "lost"
    assert job is not None
    assert job.status == "cancelled"
    assert list(reports_dir.glob(f"*{report['id']}*")) == []


async def test_report_and_job_are_created_in_one_transaction(
    app: FastAPI, enterprise: Tenant
) -> None:
    from solarapi.auth.principal import Principal
    from solarapi.kit.plans import Environment, Plan
    from solarapi.reports.parameters import ReportParameters
    from solarapi.reports.schemas import ReportCreate
    from solarapi.reports.service import create_report as create

    async with client_for(app, enterprise.live) as client:
        await one_system(client)
    principal = Principal(
        account_id=enterprise.account_id,
        environment=Environment.LIVE,
        account_name="Test",
        plan=Plan.ENTERPRISE,
        key_id="key_x",
        key_name="k",
        key_display="",
        key_created_at=utcnow(),
        key_last_used_at=None,
    )
    body = ReportParameters.from_request(
        ReportCreate.model_validate({"type": "production", "format": "csv", **PERIOD}), utcnow()
    )
    async with app.state.sessionmaker() as session:
        report = await create(session, principal, body, utcnow())
        job_id = report.job_id
        await session.rollback()  # the request failed after the service returned
    async with app.state.sessionmaker() as session:
        assert job_id is not None
        assert await session.get(Report, report.id) is None
        assert await jobs_repository.get_job(session, job_id) is None
    async with app.state.sessionmaker() as session, session.begin():
        kept = await create(session, principal, body, utcnow())
    async with app.state.sessionmaker() as session:
        job = await jobs_repository.get_job(session, kept.job_id)  # type: ignore[arg-type]
    assert job is not None
    assert (job.kind, job.payload, job.status) == (JOB_KIND, {"report_id": kept.id}, "queued")


async def test_reports_are_shaped_and_rendered_outside_the_api_process(
    app: FastAPI, enterprise: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shaping rows and drawing a PDF are pure Python that holds the GIL: on the event loop,
    or a thread of its process, it stalled every request. They run in the CPU process
    (`kit.cpu`): replaced here, in the API's process, by functions that fail, the report is
    still produced — by the untouched code over there."""

    def must_not_run_here(*_args: object) -> None:
        raise AssertionError("report work ran in the API's process")

    monkeypatch.setattr(report_jobs, "render", must_not_run_here)
    monkeypatch.setattr(report_jobs, "build", must_not_run_here)
    async with client_for(app, enterprise.live) as client:
        await one_system(client)
        report = await create_report(client, type="production", format="pdf", **PERIOD)
        done = await completed(client, app, report["id"])
        download = await client.get(f"/api/v1/reports/{report['id']}/download")
    assert download.status_code == 200
    assert download.content.startswith(b"%PDF")
    assert done["file"]["size_bytes"] == len(download.content)
