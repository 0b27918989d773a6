"""The dashboard in a real browser: Debian's Chromium, driven by Playwright, against a real
`solarapi serve` process with its own SQLite data directory.

Screenshots go to test-artifacts/ (git-ignored): overview, key created, system page at
desktop and phone width.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from solarapi.config import Settings
from tests.support import ROOT, need_service, run_cli, served, settings_env

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
PASSWORD = "a long enough password"
AMSTERDAM = ZoneInfo("Europe/Amsterdam")
KEY_PATTERN = re.compile(r"^pk_live_[0-9A-Za-z]{38}$")
# Playwright's assertions wait 5 s by default. A sign-up or log-in runs Argon2 at a lower CPU
# priority than everything else (accounts.passwords), which on a busy 2-core machine running
# the suite in parallel can take longer: waiting longer tests the same thing, not speed.
expect.set_options(timeout=30_000)


@dataclass(frozen=True)
class Server:
    base: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    need_service("Chromium", Path(CHROMIUM).exists())
    data_dir = tmp_path_factory.mktemp("browser-data")
    # An operator's install (the secret key is made by `migrate`), running its jobs.
    env = settings_env(
        Settings(data_dir=data_dir, job_runner="inline"),
        SOLARAPI_SIGNUP_PLAN="pro",
        # Every browser context is another client behind this trusted proxy (`client_headers`):
        # the tests sign up more accounts than one address may in an hour (10).
        SOLARAPI_TRUSTED_PROXIES="127.0.0.1",
        # Request logs go to a pipe nobody reads; keep them from filling it.
        SOLARAPI_LOG_LEVEL="WARNING",
    )
    run_cli(env, "migrate")
    with served(env) as server:
        yield Server(server.base, env)


@pytest.fixture(scope="module")
async def browser(server: Server) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield launched
        await launched.close()


@pytest.fixture
async def context(browser: Browser, server: Server) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(
        extra_http_headers=client_headers(),
        base_url=server.base,
        viewport={"width": 1280, "height": 900},
    )
    yield ctx
    await ctx.close()


@pytest.fixture
async def page(context: BrowserContext) -> Page:
    return await context.new_page()


def client_headers() -> dict[str, str]:
    """A client address of its own for a browser context, as a proxy would forward it: the
    per-address sign-up and log-in limits then apply per test, as per user."""
    n = next(_CLIENTS)
    return {"X-Forwarded-For": f"198.51.{n // 250}.{n % 250 + 1}"}


_CLIENTS = itertools.count()


def shot_path(name: str) -> str:
    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / f"dashboard-{name}.png")


def unique_email() -> str:
    return f"browser-{uuid.uuid4().hex[:10]}@example.com"


async def sign_up(page: Page, email: str, name: str = "Browser Test BV") -> None:
    await page.goto("/signup")
    await page.fill("input[name=name]", name)
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page).to_have_url(re.compile(r"/overview$"))


async def log_in(page: Page, email: str, password: str = PASSWORD) -> None:
    await page.goto("/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", password)
    await page.click("main button[type=submit]")


async def test_key_shown_once_works_then_revoked(page: Page, server: Server) -> None:
    await sign_up(page, unique_email())
    await page.screenshot(path=shot_path("overview-empty"), full_page=True)
    await page.click("text=Settings → API")
    await expect(page).to_have_url(re.compile(r"/settings/api$"))
    # Both prefixes are secret keys, and the page says so.
    await expect(page.locator(".secret-note").first).to_contain_text("secret")

    await page.fill("input[name=name]", "Billing server")
    await page.check("input[name=environment][value=live]")
    await page.click("#create-key button[type=submit]")
    key = (await page.inner_text("#new-key")).strip()
    assert KEY_PATTERN.match(key), key
    await expect(page.locator(".key-created")).to_contain_text("will not be shown again")
    await page.click("#copy-key")
    await expect(page.locator(".copy-status")).not_to_be_empty()
    await page.screenshot(path=shot_path("key-created"), full_page=True)

    # A reload shows the list with the display form only: the key is gone for good.
    await page.reload()
    await expect(page).to_have_url(re.compile(r"/settings/api$"))
    html = await page.content()
    assert key not in html
    display = f"{key[:12]}…{key[-4:]}"
    row = page.locator("tr", has_text="Billing server")
    await expect(row.locator(".key-display")).to_have_text(display)
    await expect(row.locator(".badge")).to_have_text("Live")
    await expect(row.locator(".status")).to_have_text("Active")

    async with httpx.AsyncClient(base_url=server.base) as api:
        account = await api.get("/api/v1/account", headers={"Authorization": f"Bearer {key}"})
        assert account.status_code == 200, account.text
        assert account.json()["plan"] == "pro"
        assert account.json()["key"]["display"] == display

        await page.goto("/settings/api")  # last used is now filled in
        await expect(row.locator("td[data-label='Last used']")).not_to_have_text("never")
        await row.locator("text=Revoke…").click()
        await expect(page.locator("h1")).to_have_text("Revoke this key?")
        await page.click("button:has-text('Revoke key')")
        await expect(page.locator(".notice")).to_contain_text("revoked")
        await expect(row.locator(".status")).to_contain_text("Revoked")

        refused = await api.get("/api/v1/account", headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 401
        assert refused.json()["code"] == "unauthorized"


async def test_log_out_wrong_password_and_log_in(page: Page) -> None:
    email = unique_email()
    await sign_up(page, email)
    await page.click("text=Log out")
    await expect(page).to_have_url(re.compile(r"/login\?notice=logged-out$"))
    await page.goto("/settings/api")
    await expect(page).to_have_url(re.compile(r"/login\?next=/settings/api$"))

    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", "not the password")
    await page.click("main button[type=submit]")
    await expect(page.locator("#form-error")).to_have_text("E-mail or password is incorrect.")
    # An unknown address gets exactly the same answer.
    await log_in(page, unique_email(), "not the password")
    await expect(page.locator("#form-error")).to_have_text("E-mail or password is incorrect.")

    await page.goto("/login?next=/settings/api")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("main button[type=submit]")
    await expect(page).to_have_url(re.compile(r"/settings/api$"))


async def test_forged_form_posts_are_rejected(page: Page, server: Server) -> None:
    await sign_up(page, unique_email())
    await page.goto("/settings/api")
    # Same origin, but a token that is not this session's: 403, no key created.
    await page.evaluate(
        """() => {
            const form = document.getElementById('create-key');
            form.querySelector('input[name=csrf]').value = 'f'.repeat(64);
            form.querySelector('input[name=name]').value = 'Forged';
            form.submit();
        }"""
    )
    await expect(page.locator("h1")).to_have_text("Form expired")
    # A page on another site that posts to the dashboard: the browser holds a valid session.
    attacker_html = f"""<!doctype html><form method="post" action="{server.base}/settings/api/keys">
        <input name="name" value="Forged"><input name="environment" value="live"></form>
        <script>document.forms[0].submit()</script>"""
    await page.context.route(
        "http://attacker.test/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=attacker_html),
    )
    attacker = await page.context.new_page()
    async with attacker.expect_navigation(url=re.compile(re.escape(server.base))):
        await attacker.goto("http://attacker.test/")
    await attacker.wait_for_load_state()
    # SameSite=Lax keeps the session cookie off the cross-site POST, so the dashboard sends
    # the browser to log in (which, being logged in on a GET, lands on the overview).
    assert "/settings/api/keys" not in attacker.url
    assert await attacker.locator("#new-key").count() == 0
    await page.goto("/settings/api")
    await expect(page.locator("tr", has_text="Forged")).to_have_count(0)


async def test_starter_sees_why_it_cannot_create_keys(page: Page, server: Server) -> None:
    email = unique_email()
    run_cli(
        server.env,
        "accounts",
        "create",
        "--name",
        "Starter Co",
        "--email",
        email,
        "--password",
        PASSWORD,
        "--plan",
        "starter",
    )
    await log_in(page, email)
    await expect(page).to_have_url(re.compile(r"/overview$"))
    await page.goto("/settings/api")
    await expect(page.locator("#starter-no-keys")).to_contain_text("Pro")
    await expect(page.locator("#starter-no-keys")).to_contain_text("Starter plan")
    await expect(page.locator("#create-key")).to_have_count(0)
    await page.goto("/settings/plan")
    await expect(page.locator("#current-plan")).to_have_text("Starter")
    await expect(page.locator("#plan-pro")).to_contain_text("10,000")


async def _enterprise_with_system(server: Server, page: Page) -> tuple[str, str, str]:
    """Sign up, have the operator upgrade the account, create a metered system with six
    days of readings through the API; returns (email, key, system id)."""
    email = unique_email()
    await sign_up(page, email, name="Solar Farm Haarlem")
    run_cli(server.env, "accounts", "set-plan", email, "enterprise")
    created = json.loads(run_cli(server.env, "keys", "create", "--account", email, "--json").stdout)
    key = created["key"]
    now = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    readings = []
    at = now - dt.timedelta(days=6)
    while at + dt.timedelta(minutes=15) <= now:
        local_hour = (at.hour + 1) % 24
        if 7 <= local_hour <= 17 and not (at.day % 3 == 0 and local_hour == 12):
            readings.append(
                {
                    "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "energy_wh": round(200 + 90 * (6 - abs(12 - local_hour)) + at.minute / 7, 2),
                    "power_w": 800.0 + 10 * local_hour,
                }
            )
        at += dt.timedelta(minutes=15)
    async with httpx.AsyncClient(
        base_url=server.base, headers={"Authorization": f"Bearer {key}"}
    ) as api:
        system = await api.post(
            "/api/v1/systems",
            json={
                "name": "Rooftop Haarlem",
                "capacity_kwp": 8.4,
                "location": {
                    "latitude": 52.38,
                    "longitude": 4.64,
                    "timezone": "Europe/Amsterdam",
                    "country": "NL",
                },
                "market_zone": "NL",
            },
        )
        assert system.status_code == 201, system.text
        system_id = system.json()["id"]
        upload = await api.post(
            f"/api/v1/systems/{system_id}/readings", json={"readings": readings}
        )
        assert upload.status_code == 200, upload.text
    return email, key, system_id


async def test_system_chart_shows_the_api_daily_totals(
    page: Page, server: Server, browser: Browser
) -> None:
    _, key, system_id = await _enterprise_with_system(server, page)
    await page.goto("/overview")
    card = page.locator(f"#system-{system_id}")
    await expect(card).to_contain_text("Rooftop Haarlem")
    await page.screenshot(path=shot_path("overview"), full_page=True)

    await card.locator("a").click()
    await expect(page).to_have_url(re.compile(rf"/systems/{system_id}$"))
    await expect(page.locator("#production-chart svg.chart-wide")).to_be_visible()
    await page.screenshot(path=shot_path("system-desktop"), full_page=True)
    bars = page.locator("#production-chart svg.chart-wide rect.bar")
    chart_values = [
        float(v)
        for v in await bars.evaluate_all("els => els.map(e => e.getAttribute('data-energy-wh'))")
    ]
    rows = page.locator("#bucket-table tbody tr")
    table = await rows.evaluate_all("els => els.map(e => [e.dataset.start, e.dataset.energyWh])")
    query = ((await page.locator("#api-query").text_content()) or "").split(" ", 1)[1]

    async with httpx.AsyncClient(
        base_url=server.base, headers={"Authorization": f"Bearer {key}"}
    ) as api:
        response = await api.get(query)
    assert response.status_code == 200, response.text
    api_days = response.json()["data"]
    assert len(api_days) == 7
    assert [start for start, _ in table] == [day["start"] for day in api_days]
    assert [float(v) if v else None for _, v in table] == [day["energy_wh"] for day in api_days]
    assert chart_values == [day["energy_wh"] for day in api_days if day["energy_wh"] is not None]
    assert sum(1 for day in api_days if day["energy_wh"]) >= 6

    # Phone width: the narrow chart is the one shown, and nothing overflows sideways.
    phone = await browser.new_context(
        extra_http_headers=client_headers(),
        base_url=server.base,
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        storage_state=await page.context.storage_state(),
    )
    try:
        mobile = await phone.new_page()
        await mobile.goto(f"/systems/{system_id}")
        await expect(mobile.locator("#production-chart svg.chart-narrow")).to_be_visible()
        await expect(mobile.locator("#production-chart svg.chart-wide")).to_be_hidden()
        width = await mobile.evaluate("document.documentElement.scrollWidth")
        assert width <= 390
        await mobile.screenshot(path=shot_path("system-phone"), full_page=True)
        await mobile.goto(f"/systems/{system_id}?interval=1h")
        await expect(
            mobile.locator("#production-chart svg.chart-narrow polyline.line").first
        ).to_be_visible()
        await mobile.screenshot(path=shot_path("system-phone-hourly"), full_page=True)
    finally:
        await phone.close()
    await page.goto(f"/systems/{system_id}?interval=1h")
    await expect(
        page.locator("#production-chart svg.chart-wide polyline.line").first
    ).to_be_visible()
    await page.screenshot(path=shot_path("system-desktop-hourly"), full_page=True)


async def _upload_irradiance(server: Server, key: str, system_id: str) -> None:
    """Sensor irradiance for every quarter-hour of the system's readings (the last six days),
    so the month's PR is defined."""
    async with httpx.AsyncClient(
        base_url=server.base, headers={"Authorization": f"Bearer {key}"}
    ) as api:
        readings = await api.get(
            f"/api/v1/systems/{system_id}/readings",
            params={
                "from": (dt.datetime.now(dt.UTC) - dt.timedelta(days=7)).isoformat(),
                "interval": "15m",
            },
        )
        assert readings.status_code == 200, readings.text
        items = [
            {
                "timestamp": bucket["start"],
                # the readings at a performance ratio of about 0.85
                "poa_w_m2": round(bucket["energy_wh"] * 4 / 8.4 / 0.85, 2),
                "ambient_temp_c": 12.0,
            }
            for bucket in readings.json()["data"]
            if bucket["energy_wh"] is not None
        ]
        uploaded = await api.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": items}
        )
        assert uploaded.status_code == 200, uploaded.text


async def _numbers(locator: Any, attribute: str) -> list[float | None]:
    values = await locator.evaluate_all(f"els => els.map(e => e.getAttribute('{attribute}'))")
    return [float(value) if value else None for value in values]


async def test_the_system_page_shows_expected_beside_actual(
    page: Page, server: Server, browser: Browser
) -> None:
    """The chart's second series, the table's Expected/EPI/PR columns and the month's PR and
    EPI are `GET /performance`'s numbers; with measured irradiance the month has a PR, without
    it the PR is "—" with the reason while the EPI is still given."""
    _, key, system_id = await _enterprise_with_system(server, page)
    await _upload_irradiance(server, key, system_id)
    await page.goto(f"/systems/{system_id}")
    await expect(page.locator("#production-chart svg.chart-wide")).to_be_visible()
    # (a level mark is a horizontal line: no height, so never "visible" to Playwright)
    marks = page.locator("#production-chart svg.chart-wide line.expected")
    await expect(page.locator("#production-chart svg.chart-wide .legend")).to_contain_text(
        "Expected"
    )
    query = ((await page.locator("#api-performance-query").text_content()) or "").split(" ", 1)[1]
    month = await page.locator("#month-performance").get_attribute("data-month")
    assert month is not None
    first = dt.date.fromisoformat(f"{month}-01")
    following = (first + dt.timedelta(days=31)).replace(day=1)
    async with httpx.AsyncClient(
        base_url=server.base, headers={"Authorization": f"Bearer {key}"}
    ) as api:
        days = (await api.get(query)).json()
        monthly = (
            await api.get(
                f"/api/v1/systems/{system_id}/performance",
                params={
                    "from": dt.datetime(first.year, first.month, 1, tzinfo=AMSTERDAM).isoformat(),
                    "to": dt.datetime(
                        following.year, following.month, 1, tzinfo=AMSTERDAM
                    ).isoformat(),
                    "interval": "1M",
                },
            )
        ).json()
    api_days = days["data"]
    assert len(api_days) == 7
    # Chart: one level mark per day with readings, at the API's expected energy.
    assert await _numbers(marks, "data-expected-wh") == [
        day["expected_energy_wh"] for day in api_days if day["expected_energy_wh"] is not None
    ]
    # Table: every day's expected energy, EPI and PR as the API gives them ("—" for none).
    rows = page.locator("#bucket-table tbody tr")
    assert await _numbers(rows, "data-expected-wh") == [d["expected_energy_wh"] for d in api_days]
    assert await _numbers(rows, "data-epi") == [d["energy_performance_index"] for d in api_days]
    assert await _numbers(rows, "data-pr") == [d["performance_ratio"] for d in api_days]
    assert any(day["performance_ratio"] is not None for day in api_days)
    total = days["meta"]["totals"]["expected_energy_wh"]
    await expect(page.locator("#total-expected")).to_have_attribute("data-expected-wh", str(total))
    # The month: PR and EPI as `interval=1M` gives them for its one bucket.
    (bucket,) = monthly["data"]
    assert bucket["performance_ratio"] is not None
    await expect(page.locator("#month-pr")).to_have_attribute(
        "data-value", str(bucket["performance_ratio"])
    )
    await expect(page.locator("#month-pr")).to_have_text(f"{bucket['performance_ratio']:.3f}")
    await expect(page.locator("#month-epi")).to_have_attribute(
        "data-value", str(bucket["energy_performance_index"])
    )
    await expect(page.locator("#month-pr-reason")).to_have_count(0)
    await page.screenshot(path=shot_path("system-expected-desktop"), full_page=True)

    # A tap on a bar reads out both values.
    await page.locator("#production-chart svg.chart-wide rect.bar").first.click()
    await expect(page.locator(".chart-readout")).to_contain_text("expected")

    # Hourly: the expected series is a dashed line beside the measured one.
    await page.goto(f"/systems/{system_id}?interval=1h")
    await expect(
        page.locator("#production-chart svg.chart-wide polyline.expected-line").first
    ).to_be_visible()
    await page.screenshot(path=shot_path("system-expected-desktop-hourly"), full_page=True)

    # Without measured irradiance: no PR (with the reason), the EPI against a typical year.
    async with httpx.AsyncClient(
        base_url=server.base, headers={"Authorization": f"Bearer {key}"}
    ) as api:
        created = await api.post(
            "/api/v1/systems",
            json={
                "name": "Shed Haarlem",
                "capacity_kwp": 3.0,
                "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
            },
        )
        other = created.json()["id"]
        readings = (
            await api.get(
                f"/api/v1/systems/{system_id}/readings",
                params={
                    "from": (dt.datetime.now(dt.UTC) - dt.timedelta(days=7)).isoformat(),
                    "interval": "15m",
                },
            )
        ).json()["data"]
        copied = [
            {"timestamp": r["start"], "energy_wh": round(r["energy_wh"] * 3 / 8.4, 3)}
            for r in readings
            if r["energy_wh"] is not None
        ]
        assert (
            await api.post(f"/api/v1/systems/{other}/readings", json={"readings": copied})
        ).status_code == 200
    phone = await browser.new_context(
        extra_http_headers=client_headers(),
        base_url=server.base,
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        storage_state=await page.context.storage_state(),
    )
    try:
        mobile = await phone.new_page()
        await mobile.goto(f"/systems/{other}")
        await expect(mobile.locator("#month-pr")).to_have_text("—")
        await expect(mobile.locator("#month-pr-reason")).to_contain_text("no measured irradiance")
        epi = await mobile.locator("#month-epi").get_attribute("data-value")
        assert epi
        assert float(epi) > 0
        await expect(mobile.locator("#production-chart svg.chart-narrow")).to_be_visible()
        assert await mobile.locator("#production-chart svg.chart-narrow line.expected").count()
        assert await mobile.evaluate("document.documentElement.scrollWidth") <= 390
        await mobile.screenshot(path=shot_path("system-expected-phone-typical"), full_page=True)
    finally:
        await phone.close()


async def test_sandbox_toggle_shows_the_simulated_systems(page: Page) -> None:
    await sign_up(page, unique_email())
    await page.click("text=Sandbox")
    await expect(page).to_have_url(re.compile(r"/overview\?env=test$"))
    cards = page.locator(".system-card")
    await expect(cards).to_have_count(3)
    await expect(page.locator(".toggle a[aria-current=true]")).to_have_text("Sandbox")
    await page.screenshot(path=shot_path("overview-sandbox"), full_page=True)
    await page.click("text=Live")
    await expect(page.locator(".system-card")).to_have_count(0)


async def test_a_new_account_gets_its_data_in(page: Page, server: Server, tmp_path: Path) -> None:
    """Sign up → add a system → upload a CSV → the chart shows it → create an ingest token →
    a logger uploads with it (plain HTTP) → the chart shows that too."""
    await sign_up(page, unique_email())
    await page.click("#add-system")
    await page.fill("input[name=name]", "Logger roof")
    await page.fill("input[name=capacity_kwp]", "5")
    await page.fill("input[name=latitude]", "52.37")
    await page.fill("input[name=longitude]", "4.9")
    await page.fill("input[name=timezone]", "Europe/Amsterdam")
    await page.select_option("select[name=market_zone]", "NL")
    await page.click("#system-form button[type=submit]")
    await expect(page.locator("h1")).to_contain_text("Logger roof")

    day = dt.datetime.now(dt.UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    day -= dt.timedelta(days=2)
    stamps = [day + dt.timedelta(minutes=15 * i) for i in range(8)]
    csv_file = tmp_path / "readings.csv"
    csv_file.write_text(
        "timestamp,energy_wh\n"
        + "".join(f"{t:%Y-%m-%dT%H:%M:%SZ},{100 + i}\n" for i, t in enumerate(stamps[:4]))
    )
    await page.set_input_files("#upload-form input[type=file]", str(csv_file))
    await page.click("#upload-form button[type=submit]")
    await expect(page.locator("#upload-result")).to_contain_text("Uploaded 4 readings")
    total = page.locator("#total-energy")
    await expect(total).to_have_attribute("data-energy-wh", "406.0")
    await expect(page.locator("#production-chart svg.chart-wide")).to_be_visible()

    await page.fill("#create-token input[name=name]", "roof logger")
    await page.click("#create-token button[type=submit]")
    token = (await page.locator("#new-key").inner_text()).strip()
    assert re.fullmatch(r"ik_[0-9A-Za-z]{38}", token)
    await page.screenshot(path=shot_path("ingest-token-created"), full_page=True)
    async with httpx.AsyncClient(base_url=server.base) as logger:
        uploaded = await logger.post(
            "/api/v1/ingest/readings",
            headers={"Authorization": f"Bearer {token}"},
            json={
                "readings": [
                    {"timestamp": f"{t:%Y-%m-%dT%H:%M:%SZ}", "energy_wh": 50.0} for t in stamps[4:]
                ]
            },
        )
    assert uploaded.status_code == 200, uploaded.text
    await page.click("text=Done, I have copied it")  # the system page, the last 7 days
    await expect(total).to_have_attribute("data-energy-wh", "606.0")
    await expect(page.locator(".token-last-used")).not_to_have_text("never")
    await page.screenshot(path=shot_path("system-after-logger"), full_page=True)


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1366, 900)])
async def test_the_system_page_at_phone_and_desktop_width(
    browser: Browser, server: Server, width: int, height: int
) -> None:
    context = await browser.new_context(
        extra_http_headers=client_headers(),
        base_url=server.base,
        viewport={"width": width, "height": height},
    )
    page = await context.new_page()
    try:
        await sign_up(page, unique_email())
        await page.goto("/overview?env=test")  # the sandbox: simulated systems with data
        await page.locator(".system-card h2 a").first.click()
        await expect(page.locator("#production-chart")).to_be_visible()
        await page.screenshot(path=shot_path(f"system-{width}x{height}"))
        await page.screenshot(path=shot_path(f"system-{width}x{height}-full"), full_page=True)
        nav = page.locator(".mainnav")
        chart = await page.locator("#production-chart svg:visible").bounding_box()
        assert chart is not None
        # Nothing is wider than the screen: the page never scrolls sideways.
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        if width < 640:
            await expect(nav).to_be_hidden()
            # The chart starts on the first screen, before its controls, with its readout.
            assert chart["y"] + chart["height"] <= height
            controls = await page.locator(".chart-controls").bounding_box()
            assert controls is not None
            assert controls["y"] > chart["y"]
            await (
                page.locator(
                    "#production-chart svg:visible .bar, #production-chart svg:visible .point"
                )
                .nth(3)
                .click()
            )
            readout = await page.locator(".chart-readout").bounding_box()
            assert readout is not None
            assert readout["y"] + readout["height"] <= height
            await page.screenshot(path=shot_path(f"system-{width}x{height}-tapped"))
            # The numbers table scrolls inside its own box.
            await page.click("details.data summary")
            wrap = await page.locator("details.data .table-wrap").bounding_box()
            assert wrap is not None
            assert wrap["width"] <= width
            await page.click(".nav-button")
            await expect(nav).to_be_visible()
            await page.screenshot(path=shot_path(f"system-{width}x{height}-menu"))
        else:
            await expect(nav).to_be_visible()
    finally:
        await context.close()


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1366, 900)])
async def test_reports_are_requested_and_downloaded_at_phone_and_desktop_width(
    browser: Browser, server: Server, width: int, height: int, tmp_path: Path
) -> None:
    """A Pro account is told why it has no reports; once Enterprise, it requests one of its
    sandbox (three systems whose clocks differ: the form says to choose a time zone, in the
    API's words), sees it complete in the list and downloads the PDF."""
    context = await browser.new_context(
        extra_http_headers=client_headers(),
        base_url=server.base,
        viewport={"width": width, "height": height},
        accept_downloads=True,
    )
    page = await context.new_page()
    try:
        email = unique_email()
        await sign_up(page, email)  # Pro
        await page.goto("/reports")
        await expect(page.locator("#reports-not-on-plan")).to_contain_text(
            "Reports come with the Enterprise plan; your account is on the Pro plan."
        )
        await page.screenshot(path=shot_path(f"reports-{width}x{height}-pro"))
        run_cli(server.env, "accounts", "set-plan", email, "enterprise")

        await page.goto("/reports?env=test")
        last = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=8)
        first = last - dt.timedelta(days=2)
        await page.select_option("select[name=type]", "production")
        await page.select_option("select[name=format]", "pdf")
        await page.fill("input[name=first_day]", first.isoformat())
        await page.fill("input[name=last_day]", last.isoformat())
        await page.click("#report-form button[type=submit]")
        error = page.locator("#form-error")
        await expect(error).to_contain_text("Timezone is required")
        await expect(error).to_contain_text("Australia/Sydney")
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await page.screenshot(
            path=shot_path(f"reports-{width}x{height}-choose-zone"), full_page=True
        )

        await page.fill("input[name=timezone]", "Europe/Amsterdam")
        await page.click("#report-form button[type=submit]")
        await expect(page.locator(".notice")).to_contain_text("The report was requested")
        row = page.locator("table.reports tbody tr").first
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
        while await row.locator(".report-status").inner_text() != "completed":
            assert dt.datetime.now(dt.UTC) < deadline, await row.inner_text()
            await page.wait_for_timeout(300)  # the poll's interval: the job runs meanwhile
            await page.get_by_role("link", name="Refresh", exact=True).click()
        period = f"{first.isoformat()} – {last.isoformat()} (Europe/Amsterdam), per day"
        await expect(row).to_contain_text(period)
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await page.screenshot(path=shot_path(f"reports-{width}x{height}-list"), full_page=True)
        async with page.expect_download() as downloading:
            await row.locator("a.download").click()
        download = await downloading.value
        assert re.fullmatch(
            rf"production_{first.isoformat()}_{last.isoformat()}_rpt_[0-9A-Za-z]+\.pdf",
            download.suggested_filename,
        ), download.suggested_filename
        saved = tmp_path / download.suggested_filename
        await download.save_as(saved)
        assert saved.read_bytes().startswith(b"%PDF-")
        if width < 640:
            # The list's rows are cards: every cell in the screen's width.
            box = await row.bounding_box()
            assert box is not None
            assert box["width"] <= width
            await page.click(".nav-button")
            await expect(page.locator(".mainnav a[href='/reports']")).to_be_visible()
            await page.screenshot(path=shot_path(f"reports-{width}x{height}-menu"))
    finally:
        await context.close()
