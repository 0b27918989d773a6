"""Reports in the dashboard: an Enterprise account requests one with the API's parameters,
rules and messages, sees it in the list with its status and downloads the file the API
serves; other plans are told why not. On both databases."""

from __future__ import annotations

import hashlib
import html
import re
from datetime import UTC, datetime

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from solarapi.models.reports import Report
from tests.dashboard.helpers import browser_for, csrf_of, log_in, nonce_of, text_of
from tests.reports.helpers import make_system, run_report_jobs, upload_readings
from tests.support import Tenant, client_for

_REPORT_ID = re.compile(r"#report-(rpt_[0-9A-Za-z]+)$")
JUNE_1 = datetime(2025, 5, 31, 22, tzinfo=UTC)  # Amsterdam's 1 June


async def _request(
    browser: httpx.AsyncClient, systems: list[str], env: str = "live", **fields: str
) -> httpx.Response:
    page = await browser.get(f"/reports?env={env}")
    assert page.status_code == 200, page.text
    form = {
        "csrf": csrf_of(page),
        "nonce": nonce_of(page),
        "environment": env,
        "type": "production",
        "format": "csv",
        "first_day": "2025-06-01",
        "last_day": "2025-06-03",
        "interval": "1d",
        "timezone": "",
        **{f"system.{system_id}": "1" for system_id in systems},
    }
    form.update(fields)
    return await browser.post("/reports", data=form)


async def test_an_enterprise_account_requests_lists_and_downloads_a_report(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        dak = await make_system(api, "Dak Haarlem", "Europe/Amsterdam", 6.0, "NL")
        dach = await make_system(api, "Dach Köln", "Europe/Berlin", 4.0, "DE-LU")
        await make_system(api, "Not in this report", "Europe/Amsterdam")
        for system in (dak, dach):
            await upload_readings(api, system, JUNE_1, 96 * 3)
        async with browser_for(app) as browser:
            await log_in(browser, enterprise.email, enterprise.password)
            page = await browser.get("/reports")
            assert page.status_code == 200
            assert 'aria-current="page">Reports</a>' in page.text
            assert "Dach Köln" in text_of(page)
            assert "No live reports yet." in text_of(page)
            form = {
                "csrf": csrf_of(page), "nonce": nonce_of(page), "environment": "live",
                "type": "production", "format": "csv", "first_day": "2025-06-01",
                "last_day": "2025-06-03", "interval": "1d", "timezone": "",
                f"system.{dak['id']}": "1", f"system.{dach['id']}": "1",
            }  # fmt: skip
            requested = await browser.post("/reports", data=form)
            assert requested.status_code == 303, requested.text
            match = _REPORT_ID.search(requested.headers["location"])
            assert match, requested.headers["location"]
            report_id = match.group(1)
            listed = await browser.get(requested.headers["location"])
            assert "The report was requested" in text_of(listed)
            row = _row(listed, report_id)
            assert "Production report" in row
            assert "queued" in row
            assert "Download" not in row
            # The same form sent again (a reload) requests nothing more.
            again = await browser.post("/reports", data=form)
            assert again.status_code == 303
            assert again.headers["location"] == "/reports?env=live&notice=already-requested"

            await run_report_jobs(app)
            done = await browser.get("/reports?env=live")
            row = _row(done, report_id)
            assert "completed" in row
            href = f"/reports/{report_id}/download?env=live"
            assert f'href="{href}"' in row
            from_dashboard = await browser.get(href)
            sandbox = await browser.get(f"/reports/{report_id}/download?env=test")
        # What the API says and serves for the same report.
        report = (await api.get(f"/api/v1/reports/{report_id}")).json()
        from_api = await api.get(f"/api/v1/reports/{report_id}/download")
        listed_api = (await api.get("/api/v1/reports")).json()["data"]

    # The form's local days are the systems' midnights; their shared clock is the calendar.
    assert report["parameters"] == {
        "system_ids": [dak["id"], dach["id"]],
        "from": "2025-05-31T22:00:00Z",
        "to": "2025-06-03T22:00:00Z",
        "interval": "1d",
        "timezone": "Europe/Amsterdam",
    }
    assert [item["id"] for item in listed_api] == [report_id]
    assert "2025-06-01 – 2025-06-03 (Europe/Amsterdam), per day" in row
    assert from_dashboard.status_code == 200
    assert from_dashboard.content == from_api.content
    for header in ("content-type", "content-disposition", "repr-digest"):
        assert from_dashboard.headers[header] == from_api.headers[header], header
    assert hashlib.sha256(from_dashboard.content).hexdigest() == report["file"]["sha256"]
    assert (
        f"production_2025-06-01_2025-06-03_{report_id}.csv"
        in (from_dashboard.headers["content-disposition"])
    )
    # Another environment's report is not found, as in the API.
    assert sandbox.status_code == 404
    assert f"No report with id '{report_id}'" in text_of(sandbox)


def _row(page: httpx.Response, report_id: str) -> str:
    match = re.search(rf'<tr id="report-{report_id}".*?</tr>', page.text, re.DOTALL)
    assert match, f"report {report_id} is not listed"
    return re.sub(r"\s+", " ", html.unescape(match.group(0)))


async def test_the_form_answers_with_the_apis_messages(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as api:
        dak = await make_system(api, "Dak", "Europe/Amsterdam", 6.0, "NL")
        roof = await make_system(api, "Roof", "Europe/London", 4.0)
        # The API's answer to the body the dashboard sends when no zone is chosen.
        api_mixed = await api.post(
            "/api/v1/reports",
            json={"type": "production", "format": "csv", "interval": "1d",
                  "system_ids": [dak["id"], roof["id"]],
                  "from": "2025-05-31T22:00:00Z", "to": "2025-06-03T22:00:00Z"},
        )  # fmt: skip
        async with browser_for(app) as browser:
            await log_in(browser, enterprise.email, enterprise.password)
            mixed = await _request(browser, [dak["id"], roof["id"]])
            unknown = await _request(browser, [dak["id"]], timezone="Mars/Olympus")
            unpriced = await _request(browser, [roof["id"]], type="market_value")
            reversed_days = await _request(browser, [dak["id"]], last_day="2025-05-01")
            no_day = await _request(browser, [dak["id"]], first_day="")
            # Year 1 on UTC's calendar made "1-01-02T00:00:00Z", which the API called a bad
            # timestamp: the form's own range is said first, with or without a zone.
            year_one = [
                await _request(
                    browser, [dak["id"]], first_day="0001-01-01", last_day="0001-01-01", **zone
                )
                for zone in ({"timezone": "UTC"}, {})
            ]
            chosen = await _request(browser, [dak["id"], roof["id"]], timezone="Europe/London")
        listed = (await api.get("/api/v1/reports")).json()["data"]

    assert api_mixed.status_code == 400
    message = api_mixed.json()["error"]
    assert mixed.status_code == 400
    assert message[:1].upper() + message[1:] + "." in text_of(mixed)
    assert 'id="form-error"' in mixed.text
    assert unknown.status_code == 400
    assert "timezone: unknown IANA time zone 'Mars/Olympus'" in text_of(unknown)
    assert 'value="Mars/Olympus"' in unknown.text  # the form keeps what was typed
    assert unpriced.status_code == 409
    assert f"System {roof['id']} has no market_zone" in text_of(unpriced)
    assert reversed_days.status_code == 400
    assert "'from' must be before 'to'" in text_of(reversed_days)
    assert no_day.status_code == 400
    assert "Choose the first day" in text_of(no_day)
    for page in year_one:
        assert page.status_code == 400
        assert "Choose days between 1970-01-01 and 2199-12-31." in text_of(page)
    assert chosen.status_code == 303, chosen.text
    # Only the one accepted request was stored, on London's midnights.
    assert len(listed) == 1
    assert listed[0]["parameters"]["timezone"] == "Europe/London"
    assert listed[0]["parameters"]["from"] == "2025-05-31T23:00:00Z"


async def test_other_plans_are_told_why_not(
    app: FastAPI, pro: Tenant, starter: Tenant, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api:
        await make_system(api, "Dak", "Europe/Amsterdam")
        made = await api.post(
            "/api/v1/reports",
            json={"type": "production", "format": "csv",
                  "from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"},
        )  # fmt: skip
        assert made.status_code == 202
    for tenant, plan in ((pro, "Pro"), (starter, "Starter")):
        async with browser_for(app) as browser:
            await log_in(browser, tenant.email, tenant.password)
            page = await browser.get("/reports")
            posted = await browser.post(
                "/reports",
                data={"csrf": csrf_of(page), "environment": "live", "type": "production",
                      "format": "csv", "first_day": "2025-06-01", "last_day": "2025-06-02"},
            )  # fmt: skip
            download = await browser.get(f"/reports/{made.json()['id']}/download")
        why = f"Reports come with the Enterprise plan; your account is on the {plan} plan."
        assert page.status_code == 200
        assert why in text_of(page)
        assert 'id="report-form"' not in page.text
        assert 'href="/settings/plan"' in page.text
        assert posted.status_code == 403
        assert why in text_of(posted)
        assert download.status_code == 403
        async with app.state.sessionmaker() as session:
            count = await session.scalar(
                select(func.count())
                .select_from(Report)
                .where(Report.account_id == tenant.account_id)
            )
        assert count == 0


async def test_the_sandbox_reports_its_simulated_systems(app: FastAPI, enterprise: Tenant) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, enterprise.email, enterprise.password)
        page = await browser.get("/reports?env=test")
        assert page.status_code == 200
        # The sandbox's three simulated systems appear on its first use, as on the overview.
        assert len(re.findall(r'name="system\.sys_', page.text)) == 3
        # Amsterdam, Berlin and Sydney have no common calendar: every system on UTC's.
        requested = await _request(browser, [], env="test", timezone="UTC", type="declarations")
        assert requested.status_code == 303, requested.text
        listed = await browser.get(requested.headers["location"])
    assert "Declarations report" in text_of(listed)
    assert "(UTC)" in text_of(listed)
