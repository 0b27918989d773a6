"""The request log line names who asked: the key's account for the API, the signed-in
person's account for a dashboard page."""

from __future__ import annotations

import orjson
from fastapi import FastAPI

from tests.dashboard.helpers import browser_for, log_in
from tests.support import LogCapture, Tenant, client_for


async def test_dashboard_lines_carry_the_account_and_the_user(
    app: FastAPI, pro: Tenant, log_lines: LogCapture
) -> None:
    async with browser_for(app) as browser:
        assert (await log_in(browser, pro.email, pro.password)).status_code == 303
        assert (await browser.get("/overview")).status_code == 200
    async with browser_for(app) as anonymous:
        await anonymous.get("/login")
    async with client_for(app, pro.live) as client:
        assert (await client.get("/api/v1/account")).status_code == 200
    lines = [orjson.loads(line) for line in log_lines.lines]
    requests = [line for line in lines if line["msg"] == "request"]
    overview = next(line for line in requests if line["path"] == "/overview")
    assert overview["account_id"] == pro.account_id
    assert overview["user_id"].startswith("usr_")
    assert overview["key_id"] is None
    login_page = [line for line in requests if line["path"] == "/login"][-1]
    assert login_page["account_id"] is None
    assert login_page["user_id"] is None
    api = next(line for line in requests if line["path"] == "/api/v1/account")
    assert api["account_id"] == pro.account_id
    assert api["key_id"] in pro.key_ids.values()
    assert api["user_id"] is None
