"""Every plan adds, edits and deletes its systems and uploads readings CSVs in the dashboard,
with the API's fields, rules and messages; on both databases."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from solarapi.systems.repository import get_record
from tests.dashboard.helpers import browser_for, csrf_of, log_in, text_of
from tests.support import Tenant, client_for

_SYSTEM_URL = re.compile(r"/systems/(sys_[0-9A-Za-z]+)")


def _form(**changes: str) -> dict[str, str]:
    form = {
        "name": "Dak Haarlem",
        "capacity_kwp": "6",
        "inverter_capacity_kw": "",
        "latitude": "52.38",
        "longitude": "4.64",
        "timezone": "Europe/Amsterdam",
        "country": "NL",
        "tilt_deg": "",
        "azimuth_deg": "",
        "market_zone": "NL",
        "installed_on": "",
        "status": "active",
        "environment": "live",
    }
    form.update(changes)
    return form


async def _add(browser: httpx.AsyncClient, **changes: str) -> httpx.Response:
    page = await browser.get("/systems/new")
    return await browser.post("/systems/new", data={"csrf": csrf_of(page), **_form(**changes)})


async def _add_system(browser: httpx.AsyncClient, **changes: str) -> str:
    created = await _add(browser, **changes)
    assert created.status_code == 303, created.text
    match = _SYSTEM_URL.search(created.headers["location"])
    assert match
    return match.group(1)


async def _upload(browser: httpx.AsyncClient, system_id: str, csv_text: str) -> httpx.Response:
    page = await browser.get(f"/systems/{system_id}")
    return await browser.post(
        f"/systems/{system_id}/readings",
        data={"csrf": csrf_of(page)},
        files={"file": ("readings.csv", csv_text.encode(), "text/csv")},
    )


def _quarters(days_back: int, count: int) -> list[str]:
    start = datetime.now(UTC).replace(hour=8, minute=0, second=0, microsecond=0)
    start -= timedelta(days=days_back)
    return [
        (start + timedelta(minutes=15 * i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(count)
    ]


async def test_a_starter_account_adds_a_system_seen_by_the_api_shape(
    app: FastAPI, starter: Tenant, enterprise: Tenant
) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, starter.email, starter.password)
        system_id = await _add_system(browser, tilt_deg="", azimuth_deg="")
        page = await browser.get(f"/systems/{system_id}?notice=created")
        assert page.status_code == 200
        assert "The system was added" in text_of(page)
    # The stored system has the API's defaults (tilt 30°, facing the equator).
    async with app.state.sessionmaker() as session:
        record = await get_record(session, system_id)
    assert record is not None
    assert (record.account_id, record.environment, record.data_source) == (
        starter.account_id,
        "live",
        "metered",
    )
    assert (record.tilt_deg, record.azimuth_deg, record.market_zone) == (30.0, 180.0, "NL")


async def test_the_form_shows_the_apis_messages(
    app: FastAPI, pro: Tenant, enterprise: Tenant
) -> None:
    bad = {"location": {"latitude": 95, "longitude": 4.64, "timezone": "Europe/Amsterdam"}}
    async with client_for(app, enterprise.live) as api:
        answer = await api.post("/api/v1/systems", json={"name": "Dak", "capacity_kwp": 6.0, **bad})
    api_message = answer.json()["error"]
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        page = await _add(browser, latitude="95")
        assert page.status_code == 400
        assert api_message in text_of(page)  # the API's words, its field name as it writes it
        assert 'value="95"' in page.text  # what was typed stays in the form
        for changes, expected in (
            ({"timezone": "Mars/Olympus"}, "unknown IANA time zone 'Mars/Olympus'"),
            ({"capacity_kwp": "lots"}, "capacity_kwp: Input should be a valid number"),
            ({"name": ""}, "name: String should have at least 1 character"),
            ({"name": "   "}, "name: must not be blank"),  # the API's message (was trimmed)
            (
                {"environment": "live", "data_source": "simulated"},
                "live systems are always 'metered'",
            ),
        ):
            page = await _add(browser, **changes)
            assert page.status_code == 400, changes
            assert expected in text_of(page), (changes, text_of(page))


async def test_edit_and_delete_a_system(app: FastAPI, pro: Tenant) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        system_id = await _add_system(browser)
        form = await browser.get(f"/systems/{system_id}/edit")
        assert 'value="Dak Haarlem"' in form.text
        saved = await browser.post(
            f"/systems/{system_id}/edit",
            data={
                "csrf": csrf_of(form),
                **_form(name="Dak Leiden", capacity_kwp="7.5", market_zone=""),
            },
        )
        assert saved.status_code == 303
        page = await browser.get(f"/systems/{system_id}")
        assert "Dak Leiden" in page.text
        assert "7.5 kWp" in page.text
        assert "zone NL" not in page.text
        refused = await browser.post(
            f"/systems/{system_id}/edit", data={"csrf": csrf_of(form), **_form(capacity_kwp="-1")}
        )
        assert refused.status_code == 400
        assert "capacity_kwp: Input should be greater than 0" in text_of(refused)
        confirm = await browser.get(f"/systems/{system_id}/delete")
        deleted = await browser.post(
            f"/systems/{system_id}/delete", data={"csrf": csrf_of(confirm)}
        )
        assert deleted.status_code == 303
        assert (await browser.get(f"/systems/{system_id}")).status_code == 404


async def test_another_accounts_system_is_not_found(
    app: FastAPI, pro: Tenant, starter: Tenant
) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        system_id = await _add_system(browser)
    async with browser_for(app) as other:
        await log_in(other, starter.email, starter.password)
        assert (await other.get(f"/systems/{system_id}/edit")).status_code == 404
        page = await other.get("/overview")
        refused = await other.post(f"/systems/{system_id}/delete", data={"csrf": csrf_of(page)})
        assert refused.status_code == 404


async def test_a_csv_upload_is_stored_and_charted(app: FastAPI, starter: Tenant) -> None:
    stamps = _quarters(2, 8)
    csv_text = "timestamp,energy_wh,power_w\r\n" + "".join(
        f"{stamp},{100 + i},{400 + i}\r\n" for i, stamp in enumerate(stamps)
    )
    async with browser_for(app) as browser:
        await log_in(browser, starter.email, starter.password)
        system_id = await _add_system(browser)
        uploaded = await _upload(browser, system_id, csv_text)
        assert uploaded.status_code == 303, uploaded.text
        page = await browser.get(uploaded.headers["location"])
        text = text_of(page)
        assert "Uploaded 8 readings: 8 new, 0 replaced" in text
        total = re.search(r'id="total-energy" data-energy-wh="([^"]*)"', page.text)
        assert total
        assert float(total.group(1)) == sum(100 + i for i in range(8))
        again = await _upload(browser, system_id, csv_text)
        page = await browser.get(again.headers["location"])
        assert "8 readings: 0 new, 8 replaced" in text_of(page)


async def test_a_bad_line_stores_nothing_and_is_named(app: FastAPI, pro: Tenant) -> None:
    stamps = _quarters(120, 10_002)  # two batches of the parser: the error is in the second
    rows = [f"{stamp},10" for stamp in stamps]
    rows[10_001] = f"{stamps[10_001]},-1"
    csv_text = "timestamp,energy_wh\n" + "\n".join(rows) + "\n"
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        system_id = await _add_system(browser, capacity_kwp="10")
        refused = await _upload(browser, system_id, csv_text)
        assert refused.status_code == 400
        assert "Nothing was stored: Line 10003: energy_wh: must be ≥ 0; got -1.0" in text_of(
            refused
        ), re.findall(r'role="alert"[^<]*<', text_of(refused))
        for bad, message in (
            ("time,energy\n", "Line 1: the header must be"),
            ("timestamp,energy_wh\n2026-01-01T00:00:00,5\n", "Line 2: timestamp:"),
            (
                "timestamp,energy_wh\n2026-01-01T00:00:00Z,five\n",
                "Line 2: energy_wh: 'five' is not a number",
            ),
            ("timestamp,energy_wh\n", "The file holds no readings"),
        ):
            answer = await _upload(browser, system_id, bad)
            assert answer.status_code == 400
            assert message in text_of(answer), text_of(answer)
    async with app.state.sessionmaker() as session:
        record = await get_record(session, system_id)
    assert record is not None
    assert record.first_reading_at is None


async def test_a_quarter_hour_given_twice_is_refused_wherever_it_is(
    app: FastAPI, pro: Tenant
) -> None:
    """The file is stored as a whole, yet a quarter-hour given twice was refused only when
    both rows fell in one 10,000-row batch of the parser: further apart the later row
    silently replaced the earlier ("1 replaced"). Both now name the two lines and store
    nothing."""
    stamps = _quarters(120, 10_005)
    rows = [f"{stamp},10" for stamp in stamps]
    near = "timestamp,energy_wh\n" + "\n".join([*rows[:5], f"{stamps[2]},11"]) + "\n"
    far = "timestamp,energy_wh\n" + "\n".join([*rows, f"{stamps[3]},11"]) + "\n"
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        system_id = await _add_system(browser, capacity_kwp="10")
        refused_near = await _upload(browser, system_id, near)
        refused_far = await _upload(browser, system_id, far)
    assert refused_near.status_code == 400
    assert (
        f"Nothing was stored: Line 7: timestamp: {stamps[2]} repeats line 4; each quarter-hour "
        "may appear once per file" in text_of(refused_near)
    )
    assert refused_far.status_code == 400, refused_far.headers.get("location")
    assert (
        f"Nothing was stored: Line 10007: timestamp: {stamps[3]} repeats line 5; each "
        "quarter-hour may appear once per file" in text_of(refused_far)
    )
    async with app.state.sessionmaker() as session:
        record = await get_record(session, system_id)
    assert record is not None
    assert record.first_reading_at is None


async def test_a_european_export_is_told_what_to_change(app: FastAPI, pro: Tenant) -> None:
    """Semicolons, decimal commas and kWh columns (the usual inverter or spreadsheet export in
    Europe) were told only "the header must be …" or "'1,5' is not a number"."""
    async with browser_for(app) as browser:
        await log_in(browser, pro.email, pro.password)
        system_id = await _add_system(browser)
        for bad, message in (
            (
                "timestamp;energy_wh\n2026-01-01T00:00:00Z;1,5\n",
                "this file's columns are separated by ';': save it with commas",
            ),
            (
                'timestamp,energy_wh\n2026-01-01T00:00:00Z,"1,5"\n',
                "Line 2: energy_wh: '1,5' is not a number (write decimals with a point: 1.5)",
            ),
            (
                "timestamp,energy_kwh\n2026-01-01T00:00:00Z,1.5\n",
                "energy is in Wh: multiply a kWh column by 1000 and name it energy_wh",
            ),
        ):
            answer = await _upload(browser, system_id, bad)
            assert answer.status_code == 400
            assert message in text_of(answer), text_of(answer)


async def test_the_plan_page_gives_the_exact_step_to_change_plan(
    app: FastAPI, starter: Tenant
) -> None:
    async with browser_for(app) as browser:
        await log_in(browser, starter.email, starter.password)
        page = text_of(await browser.get("/settings/plan"))
        keys = text_of(await browser.get("/settings/api"))
    assert f"solarapi accounts set-plan {starter.email} pro" in page
    assert "SOLARAPI_SIGNUP_PLAN=pro make run" in page
    assert "upload readings CSVs" in page  # what Starter does give
    assert "solarapi accounts set-plan <your e-mail> pro" in keys
