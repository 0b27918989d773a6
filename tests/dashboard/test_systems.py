"""Overview and system pages show the numbers the API returns, on both databases."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
from fastapi import FastAPI
from sqlalchemy import update

from solarapi.dashboard import service as dashboard_service
from solarapi.kit.grid import local_midnight
from solarapi.models.systems import System
from solarapi.systems.span import simulated_span
from tests.dashboard.helpers import browser_for, log_in
from tests.support import Tenant, client_for

AMS = ZoneInfo("Europe/Amsterdam")
_ROW = re.compile(r'<tr data-start="([^"]+)" data-energy-wh="([^"]*)"')
_PERFORMANCE_ROW = re.compile(
    r'<tr data-start="([^"]+)" data-energy-wh="[^"]*" data-expected-wh="([^"]*)" '
    r'data-epi="([^"]*)" data-pr="([^"]*)"'
)


async def _system_with_readings(api: httpx.AsyncClient, days: int = 3) -> str:
    created = await api.post(
        "/api/v1/systems",
        json={
            "name": "Dak Haarlem",
            "capacity_kwp": 6.0,
            "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
        },
    )
    assert created.status_code == 201, created.text
    system_id: str = created.json()["id"]
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    now -= timedelta(minutes=now.minute % 15)
    readings: list[dict[str, Any]] = []
    at = now - timedelta(days=days)
    index = 0
    while at + timedelta(minutes=15) <= now:
        index += 1
        if index % 11:  # leave gaps
            readings.append(
                {
                    "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "energy_wh": round(37.5 + (index * 7.3) % 400, 2),
                    "power_w": float(index % 1500),
                }
            )
        at += timedelta(minutes=15)
    upload = await api.post(f"/api/v1/systems/{system_id}/readings", json={"readings": readings})
    assert upload.status_code == 200, upload.text
    return system_id


def _table(page: httpx.Response) -> list[tuple[str, float | None]]:
    return [(start, float(v) if v else None) for start, v in _ROW.findall(page.text)]


async def test_system_page_shows_the_readings_endpoint_numbers(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        system_id = await _system_with_readings(api)
        await log_in(client, enterprise.email, enterprise.password)
        today = datetime.now(AMS).date()
        cases = [
            ({}, 7, "1d"),
            (
                {"from": str(today - timedelta(days=1)), "to": str(today), "interval": "1h"},
                None,
                "1h",
            ),
            # Yesterday, not today: just after local midnight today has no reading yet.
            (
                {
                    "from": str(today - timedelta(days=1)),
                    "to": str(today - timedelta(days=1)),
                    "interval": "15m",
                },
                None,
                "15m",
            ),
            (
                {"from": str(today - timedelta(days=40)), "to": str(today), "interval": "1M"},
                None,
                "1M",
            ),
        ]
        for params, expected_count, interval in cases:
            page = await client.get(f"/systems/{system_id}", params=params)
            assert page.status_code == 200, (params, page.text[:300])
            query = re.search(r'id="api-query">GET ([^<]+)</code>', page.text)
            assert query
            response = await api.get(query.group(1).replace("&amp;", "&"))
            assert response.status_code == 200
            body = response.json()
            assert body["meta"]["interval"] == interval
            rows = _table(page)
            assert rows == [(item["start"], item["energy_wh"]) for item in body["data"]]
            if expected_count:
                assert len(rows) == expected_count
            assert any(value for _, value in rows)
            total = re.search(r'id="total-energy" data-energy-wh="([^"]*)"', page.text)
            assert total
            assert float(total.group(1)) == body["meta"]["totals"]["energy_wh"]
            shape = "rect" if interval in ("1d", "1M") else "polyline"
            assert f'<{shape} class="{"bar" if shape == "rect" else "line"}"' in page.text


def _number(text: str) -> float | None:
    return float(text) if text else None


async def test_system_page_shows_the_performance_endpoint_numbers(
    app: FastAPI, enterprise: Tenant
) -> None:
    """Expected energy, EPI and PR per bucket, the range's expected total and the month's
    PR and EPI are `GET /performance`'s; hourly buckets add up to the API's days."""
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        system_id = await _system_with_readings(api)
        # Measured irradiance for the first day's quarter-hours only: that day has a PR, the
        # others (typical year) and the month (mixed) have none.
        stored = (
            await api.get(
                f"/api/v1/systems/{system_id}/readings",
                params={"from": (datetime.now(UTC) - timedelta(days=3)).isoformat(),
                        "interval": "15m"},
            )
        ).json()["data"]  # fmt: skip
        first_day = datetime.now(AMS).date() - timedelta(days=3)
        irradiance = [
            {"timestamp": item["start"], "poa_w_m2": 400.0, "ambient_temp_c": 10.0}
            for item in stored
            if datetime.fromisoformat(item["start"]).astimezone(AMS).date() == first_day
        ]
        assert irradiance
        uploaded = await api.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": irradiance}
        )
        assert uploaded.status_code == 200, uploaded.text
        await log_in(client, enterprise.email, enterprise.password)
        page = await client.get(f"/systems/{system_id}")
        assert page.status_code == 200, page.text[:300]
        query = re.search(r'id="api-performance-query">GET ([^<]+)</code>', page.text)
        assert query
        body = (await api.get(query.group(1).replace("&amp;", "&"))).json()
        rows = _PERFORMANCE_ROW.findall(page.text)
        assert [(start, _number(e), _number(i), _number(p)) for start, e, i, p in rows] == [
            (
                item["start"],
                item["expected_energy_wh"],
                item["energy_performance_index"],
                item["performance_ratio"],
            )
            for item in body["data"]
        ]
        assert [item["performance_ratio"] is not None for item in body["data"]].count(True) == 1
        marks = re.findall(r'<line class="expected"[^>]* data-expected-wh="([^"]+)"', page.text)
        with_readings = [i["expected_energy_wh"] for i in body["data"] if i["samples"]]
        assert [float(v) for v in marks] == with_readings * 2  # wide and narrow chart
        total = re.search(r'id="total-expected" data-expected-wh="([^"]*)"', page.text)
        assert total
        assert float(total.group(1)) == body["meta"]["totals"]["expected_energy_wh"]

        # The month of the range's last day, as `interval=1M` gives it.
        today = datetime.now(AMS).date()
        first = today.replace(day=1)
        following = (first + timedelta(days=31)).replace(day=1)
        month = (
            await api.get(
                f"/api/v1/systems/{system_id}/performance",
                params={
                    "from": datetime(first.year, first.month, 1, tzinfo=AMS).isoformat(),
                    "to": datetime(following.year, following.month, 1, tzinfo=AMS).isoformat(),
                    "interval": "1M",
                },
            )
        ).json()["data"][0]
        epi = re.search(r'id="month-epi" data-value="([^"]*)"', page.text)
        pr = re.search(r'id="month-pr" data-value="([^"]*)">([^<]*)<', page.text)
        assert epi
        assert pr
        assert _number(epi.group(1)) == month["energy_performance_index"]
        assert month["energy_performance_index"] is not None
        assert _number(pr.group(1)) == month["performance_ratio"]
        if month["performance_ratio"] is None:  # the usual case: typical and measured mixed
            assert pr.group(2) == "—"
            assert 'id="month-pr-reason"' in page.text

        # Hourly buckets: the same model, summed per hour, adds up to the API's days.
        day = today - timedelta(days=2)
        hourly = await client.get(
            f"/systems/{system_id}", params={"from": str(day), "to": str(day), "interval": "1h"}
        )
        hours = _PERFORMANCE_ROW.findall(hourly.text)
        assert len(hours) in (23, 24, 25)
        (api_day,) = [
            item
            for item in body["data"]
            if datetime.fromisoformat(item["start"]).astimezone(AMS).date() == day
        ]
        summed = sum(_number(expected) or 0.0 for _, expected, _, _ in hours)
        assert abs(summed - api_day["expected_energy_wh"]) <= 0.0005 * len(hours) + 1e-9
        assert 'class="expected-line"' in hourly.text


async def test_overview_agrees_with_the_summary_endpoint(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        system_id = await _system_with_readings(api, days=2)
        summary = (await api.get(f"/api/v1/systems/{system_id}/summary")).json()
        await log_in(client, enterprise.email, enterprise.password)
        live = await client.get("/overview")
        sandbox = await client.get("/overview?env=test")
    card = re.search(rf'id="system-{system_id}">.*?</section>', live.text, re.S)
    assert card
    today = re.search(r'class="big energy-today" data-energy-wh="([^"]*)"', card.group(0))
    assert today
    expected = summary["energy_today_wh"]
    assert (float(today.group(1)) if today.group(1) else None) == expected
    last = summary["last_reading_at"]
    assert last is not None
    shown = f"{last[:10]} {last[11:16]} UTC"
    assert shown in card.group(0)
    # A live system is not in the sandbox view.
    assert system_id not in sandbox.text


async def test_sandbox_systems_show_in_the_sandbox_view_only(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.test) as sandbox_api, browser_for(app) as client:
        created = await _sydney_roof(sandbox_api, "Sandbox roof")
        assert created.status_code == 201, created.text
        system_id = created.json()["id"]
        await log_in(client, enterprise.email, enterprise.password)
        # The summary before and after the page: a quarter-hour may end between the two
        # requests, and the page then agrees with one of them.
        before = (await sandbox_api.get(f"/api/v1/systems/{system_id}/summary")).json()
        sandbox = await client.get("/overview?env=test")
        after = (await sandbox_api.get(f"/api/v1/systems/{system_id}/summary")).json()
        live = await client.get("/overview")
        page = await client.get(f"/systems/{system_id}")
    card = re.search(rf'id="system-{system_id}">.*?</section>', sandbox.text, re.S)
    assert card
    # A simulated system: today's energy and last reading agree with the API's summary.
    today = re.search(r'data-energy-wh="([^"]*)"', card.group(0))
    assert today
    shown = float(today.group(1)) if today.group(1) else None
    assert shown in {before["energy_today_wh"], after["energy_today_wh"]}
    assert any(
        f"{last[:10]} {last[11:16]} UTC" in card.group(0)
        for last in (before["last_reading_at"], after["last_reading_at"])
    )
    assert system_id not in live.text
    assert page.status_code == 200
    assert "Sandbox</span>" in page.text


async def test_another_accounts_system_is_not_found(
    app: FastAPI, enterprise: Tenant, pro: Tenant
) -> None:
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        created = await api.post(
            "/api/v1/systems",
            json={
                "name": "Private",
                "capacity_kwp": 3.0,
                "location": {"latitude": 50.0, "longitude": 5.0, "timezone": "Europe/Brussels"},
            },
        )
        system_id = created.json()["id"]
        await log_in(client, pro.email, pro.password)
        page = await client.get(f"/systems/{system_id}")
    assert page.status_code == 404
    assert "Private" not in page.text
    assert f"No system with id &#39;{system_id}&#39;" in page.text  # the API's one message
    assert "Log out" in page.text  # the error page keeps the logged-in navigation


async def test_bad_ranges_are_explained_on_the_page(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        system_id = await _system_with_readings(api, days=1)
        await log_in(client, enterprise.email, enterprise.password)
        reversed_range = await client.get(
            f"/systems/{system_id}", params={"from": "2025-06-10", "to": "2025-06-01"}
        )
        bad_interval = await client.get(f"/systems/{system_id}", params={"interval": "2x"})
        too_long = await client.get(
            f"/systems/{system_id}",
            params={"from": "2020-01-01", "to": "2025-12-31", "interval": "15m"},
        )
        bad_date = await client.get(f"/systems/{system_id}", params={"from": "yesterday"})
        # Days whose midnights a datetime cannot hold (year 1, the day after 9999-12-31).
        year_one = await client.get(
            f"/systems/{system_id}",
            params={"from": "0001-01-01", "to": "0001-01-31", "interval": "1d"},
        )
        last_day = await client.get(
            f"/systems/{system_id}",
            params={"from": "9999-12-31", "to": "9999-12-31", "interval": "1h"},
        )
    for page, text in (
        (year_one, "Choose days between 1970-01-01 and 2199-12-31."),
        (last_day, "Choose days between 1970-01-01 and 2199-12-31."),
        (reversed_range, "The first day must not be after the last day."),
        (bad_interval, "Interval must be one of 15m, 30m, 1h, 1d, 1w, 1M"),
        (too_long, "more than the 10,000 allowed"),
        (bad_date, "is not a date in the form YYYY-MM-DD"),
    ):
        assert page.status_code == 400
        assert text in page.text.replace("&#39;", "'")
        assert 'id="chart-error"' in page.text


async def test_an_unexpected_failure_is_an_html_500_page(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as api, browser_for(app) as client:
        system_id = await _system_with_readings(api, days=1)
        # A time zone the database should never hold: the page cannot be drawn.
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(System).where(System.id == system_id).values(timezone="Mars/Olympus_Mons")
            )
        await log_in(client, enterprise.email, enterprise.password)
        page = await client.get(f"/systems/{system_id}")
    assert page.status_code == 500
    assert page.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in page.text
    assert page.headers["x-request-id"] in page.text
    assert "Traceback" not in page.text
    assert page.headers["x-frame-options"] == "DENY"


async def test_a_simulated_systems_card_shows_the_apis_last_reading_at_a_local_midnight(
    app: FastAPI, enterprise: Tenant
) -> None:
    """In the first quarter-hour of a local day no quarter-hour of today has ended: the card
    still shows the API's last reading (yesterday's last quarter-hour), not "none yet"."""
    sydney = ZoneInfo("Australia/Sydney")
    async with client_for(app, enterprise.test) as sandbox_api:
        created = await _sydney_roof(sandbox_api, "Midnight roof", installed_on="2025-01-01")
    assert created.status_code == 201, created.text
    midnight = datetime.fromtimestamp(
        local_midnight(datetime.now(sydney).date() - timedelta(days=1), sydney), UTC
    )
    async with app.state.sessionmaker() as session:
        system = await session.get(System, created.json()["id"])
        assert system is not None
        for after_midnight, last in ((5, -15), (14, -15), (15, 0), (31, 15)):
            now = midnight + timedelta(minutes=after_midnight)
            (card,) = await dashboard_service.system_cards(session, [system], now)
            assert card.last_reading_at == midnight + timedelta(minutes=last)
            api_last = simulated_span(system.installed_on, system.timezone, now)[1]
            assert api_last is not None
            assert card.last_reading_at == datetime.fromisoformat(api_last)
            if after_midnight < 15:
                assert card.energy_today_wh is None  # no quarter-hour of today yet


async def _sydney_roof(api: httpx.AsyncClient, name: str, **fields: str) -> httpx.Response:
    """`POST /systems` of a 4 kWp roof in Sydney (a zone far from UTC: its local midnight is
    13:00 or 14:00 UTC), with `fields` added."""
    location = {"latitude": -33.87, "longitude": 151.2, "timezone": "Australia/Sydney"}
    return await api.post(
        "/api/v1/systems",
        json={"name": name, "capacity_kwp": 4.0, "location": location, **fields},
    )
