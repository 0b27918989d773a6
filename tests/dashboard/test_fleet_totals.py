"""The overview's fleet totals equal `GET /portfolio/summary`'s `meta.totals`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from fastapi import FastAPI

from tests.dashboard.helpers import browser_for, log_in
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, quarter_series, upload


async def test_overview_shows_the_fleet_totals(app: FastAPI, enterprise: Tenant) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    recent = now - timedelta(minutes=now.minute % 15) - timedelta(hours=1)
    async with client_for(app, enterprise.live) as api:
        for i in range(2):
            system_id = (await create_system(api, name=f"Fleet {i}", capacity_kwp=5.0))["id"]
            assert (
                await upload(api, system_id, quarter_series(recent, 2, 250.0 * (i + 1)))
            ).status_code == 200
        totals = (await api.get("/api/v1/portfolio/summary")).json()["meta"]["totals"]
    async with browser_for(app) as browser:
        await log_in(browser, enterprise.email, enterprise.password)
        page = await browser.get("/overview")
        sandbox = await browser.get("/overview?env=test")
    assert page.status_code == 200
    today = re.search(r'class="fleet-today" data-energy-wh="([^"]*)"', page.text)
    assert today is not None
    # (Empty when no reading lies in the local today: in the hour after local midnight.)
    expected = totals["energy_today_wh"]
    assert (float(today.group(1)) if today.group(1) else None) == expected
    assert "2 systems · 10.0 kWp" in page.text
    if totals["specific_yield_today_kwh_kwp"] is not None:
        assert f"{totals['specific_yield_today_kwh_kwp']:.2f} kWh/kWp" in page.text
    assert "fleet-totals" in sandbox.text


async def test_sandbox_overview_shows_the_fleet_totals(app: FastAPI, enterprise: Tenant) -> None:
    """The sandbox's simulated systems have fleet totals too, the test key's
    `/portfolio/summary` ones (read just before and just after the page: simulated energy
    only grows as quarter-hours end)."""
    async with client_for(app, enterprise.test) as api:
        before = (await api.get("/api/v1/portfolio/summary")).json()["meta"]["totals"]
        async with browser_for(app) as browser:
            await log_in(browser, enterprise.email, enterprise.password)
            page = await browser.get("/overview?env=test")
        after = (await api.get("/api/v1/portfolio/summary")).json()["meta"]["totals"]
    assert page.status_code == 200
    assert before["systems"] > 0
    assert f"{before['systems']} systems · {before['capacity_kwp']:.1f} kWp" in page.text
    today = re.search(r'class="fleet-today" data-energy-wh="([^"]*)"', page.text)
    assert today is not None
    if before["energy_today_wh"] is None:
        assert today.group(1) in ("", str(after["energy_today_wh"]))
    else:
        assert before["energy_today_wh"] <= float(today.group(1)) <= after["energy_today_wh"]
