"""`solarapi prices import` as an operator runs it: a real subprocess on each database."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI

from tests.prices.helpers import DATA, stored_rows, utc
from tests.support import Tenant, client_for, run_cli, settings_env

# Every refusal's message is checked in test_parsers; here, that the command exits 1 with
# it, without a traceback, and that the database is unchanged. Each run is a process start,
# so a few representative files.
REFUSED = [
    ("billion_laughs.xml", "entity declarations are refused"),
    ("external_entity.xml", "external entities are refused"),
    ("bad_line.csv", "line 4: timestamp"),
]


@pytest.mark.slow
async def test_cli_imports_csv_and_refuses_bad_files_storing_nothing(
    app: FastAPI, pro: Tenant
) -> None:
    env = settings_env(app.state.settings)
    result = run_cli(
        env, "prices", "import", str(DATA / "prices_be_2024-03-02.csv"), "--zone", "BE", "--json"
    )
    report = json.loads(result.stdout)
    assert report["zone"] == "BE"
    assert report["source"] == "csv"
    assert report["stored"] == 7
    assert (report["from"], report["to"]) == ("2024-03-01T23:00:00Z", "2024-03-02T03:00:00Z")
    assert report["resolutions"] == ["PT15M", "PT60M"]

    window = (utc("2024-03-01T00:00:00Z"), utc("2024-03-06T00:00:00Z"))
    before = await stored_rows(app, "BE", *window)
    assert len(before) == 7
    for name, message in REFUSED:
        refused = run_cli(env, "prices", "import", str(DATA / name), "--zone", "BE", check=False)
        assert refused.returncode == 1, name
        assert message in refused.stderr, (name, refused.stderr)
        assert "Traceback" not in refused.stderr
    assert await stored_rows(app, "BE", *window) == before

    async with client_for(app, pro.live) as client:
        response = await client.get(
            "/api/v1/market-prices",
            params={
                "zone": "BE",
                "interval": "1h",
                "from": "2024-03-01T23:00:00Z",
                "to": "2024-03-02T03:00:00Z",
            },
        )
    prices = [item["price_eur_per_mwh"] for item in response.json()["data"]]
    assert prices == [61.2, 59.8, -4.5, pytest.approx((55 + 56 + 57 + 58) / 4)]
    assert response.json()["meta"]["source"] == "csv"


@pytest.mark.slow
async def test_cli_rejects_a_bad_resolution_option(app: FastAPI) -> None:
    refused = run_cli(
        settings_env(app.state.settings), "prices", "import", str(DATA / "prices_be_2024-03-02.csv"),
        "--zone", "BE", "--resolution", "20m", check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--resolution must be 15m, 30m or 60m; got '20m'" in refused.stderr
