"""Market value and declarations reports: CSV rows equal the API's own numbers; the PDFs
carry the title block, chart and tables."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pypdf
from fastapi import FastAPI

from tests.prices.helpers import import_file, write_csv
from tests.reports.helpers import (
    completed,
    create_report,
    make_system,
    number,
    parse_csv,
    upload_readings,
)
from tests.reports.test_production import render_first_page
from tests.support import Tenant, client_for

# A day of PL prices no other test imports: 2024-02-10 to 2024-02-12 local (Warsaw, UTC+1).
PL_START = datetime(2024, 2, 9, 23, tzinfo=UTC)


def pl_price(hour: int) -> float:
    return round(40.0 + (hour % 24) * 3.25 - (30.0 if 11 <= hour % 24 <= 13 else 0.0), 2)


async def test_market_value_csv_and_pdf_match_the_market_value_endpoint(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    prices = [
        ((PL_START + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), pl_price(h))
        for h in range(48)
    ]
    await import_file(app, write_csv(tmp_path, "pl.csv", prices), "PL", 3600)
    params = {"from": "2024-02-10T00:00:00+01:00", "to": "2024-02-12T00:00:00+01:00"}
    async with client_for(app, enterprise.live) as client:
        warsaw = await make_system(client, "Dach Warszawa", "Europe/Warsaw", 8.0, "PL")
        krakow = await make_system(client, "Kraków roof", "Europe/Warsaw", 4.0, "PL")
        await upload_readings(client, warsaw, PL_START, 96 * 2)
        await upload_readings(client, krakow, PL_START, 96, skip={40, 41})
        csv_report = await create_report(
            client, type="market_value", format="csv", interval="1h", **params
        )
        pdf_report = await create_report(
            client, type="market_value", format="pdf", interval="1d", **params
        )
        assert csv_report["parameters"]["system_ids"] == [warsaw["id"], krakow["id"]]
        csv_done = await completed(client, app, csv_report["id"])
        pdf_done = await completed(client, app, pdf_report["id"])
        csv_bytes = (await client.get(csv_done["download_url"])).content
        pdf_response = await client.get(pdf_done["download_url"])
        expected = {
            system["id"]: (
                await client.get(
                    f"/api/v1/systems/{system['id']}/market-value",
                    params={**params, "interval": "1h"},
                )
            ).json()
            for system in (warsaw, krakow)
        }
        daily = (
            await client.get(
                f"/api/v1/systems/{warsaw['id']}/market-value", params={**params, "interval": "1d"}
            )
        ).json()

    rows = parse_csv(csv_bytes)
    assert list(rows[0]) == [
        "system_id", "system_name", "market_zone", "bucket_start_utc", "bucket_end_utc",
        "period_local", "energy_wh", "price_eur_per_mwh", "value_eur",
    ]  # fmt: skip
    for system_id, body in expected.items():
        mine = [row for row in rows if row["system_id"] == system_id]
        assert len(mine) == len(body["data"]) == 48
        for row, bucket in zip(mine, body["data"], strict=True):
            assert row["bucket_start_utc"] == bucket["start"]
            assert number(row["energy_wh"]) == bucket["energy_wh"]
            assert number(row["price_eur_per_mwh"]) == bucket["price_eur_per_mwh"]
            assert number(row["value_eur"]) == bucket["value_eur"]
    # Independent check of one bucket: 11:00–12:00 Warsaw (10:00Z) = the hour's energy × price.
    warsaw_rows = [row for row in rows if row["system_id"] == warsaw["id"]]
    noon = warsaw_rows[11]
    assert noon["bucket_start_utc"] == "2024-02-10T10:00:00Z"
    assert number(noon["price_eur_per_mwh"]) == pl_price(11)
    energy = number(noon["energy_wh"])
    assert energy is not None
    assert abs(number(noon["value_eur"]) - energy / 1e6 * pl_price(11)) < 1e-3  # type: ignore[operator]
    # Kraków's second day has no readings: empty, never zero.
    krakow_rows = [row for row in rows if row["system_id"] == krakow["id"]]
    assert krakow_rows[-1]["energy_wh"] == ""
    assert krakow_rows[-1]["value_eur"] == ""

    assert pdf_response.headers["content-type"] == "application/pdf"
    pdf = pypdf.PdfReader(io.BytesIO(pdf_response.content))
    text = "\n".join(page.extract_text() for page in pdf.pages)
    assert "Market value report" in text
    assert "Dach Warszawa" in text
    assert "Kraków roof" in text
    assert f"Page 1 of {len(pdf.pages)}" in text
    total = daily["meta"]["totals"]["value_eur"]
    assert f"{total:,.2f}" in text  # the system's total value, as the API computes it, in cents
    render_first_page(pdf_response.content, "market-value-1d.png")


async def test_declarations_csv_and_pdf_list_status_and_history(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.test) as client:
        system = await make_system(client, "Sandbox metered", "Europe/Amsterdam", 6.0)
        assert system["data_source"] == "simulated"
        metered = await client.post(
            "/api/v1/systems",
            json={"name": "Sandbox meter", "capacity_kwp": 6.0, "data_source": "metered",
                  "location": {"latitude": 52.0, "longitude": 5.0,
                               "timezone": "Europe/Amsterdam"}},
        )  # fmt: skip
        assert metered.status_code == 201, metered.text
        meter = metered.json()
        start = datetime(2025, 4, 30, 22, tzinfo=UTC)  # 2025-05-01 00:00 Amsterdam
        await upload_readings(client, meter, start, 96 * 4)
        declarations = []
        for first, last, kind in (
            ("2025-05-01", "2025-05-02", "guarantee_of_origin"),
            ("2025-05-03", "2025-05-04", "feed_in"),
        ):
            response = await client.post(
                "/api/v1/declarations",
                json={"system_id": meter["id"], "type": kind,
                      "period_start": first, "period_end": last, "reference": f"REF-{first}"},
            )  # fmt: skip
            assert response.status_code == 201, response.text
            declarations.append(response.json())
        submitted = await client.post(f"/api/v1/declarations/{declarations[0]['id']}/submit")
        assert submitted.status_code == 200, submitted.text
        history = (
            await client.get(f"/api/v1/declarations/{declarations[0]['id']}/history")
        ).json()["data"]
        current = [
            (await client.get(f"/api/v1/declarations/{item['id']}")).json() for item in declarations
        ]
        period = {"from": "2025-05-01T00:00:00+02:00", "to": "2025-05-04T00:00:00+02:00"}
        csv_report = await create_report(
            client, type="declarations", format="csv", system_ids=[meter["id"]], **period
        )
        pdf_report = await create_report(
            client, type="declarations", format="pdf", system_ids=[meter["id"]], **period
        )
        assert "interval" not in csv_report["parameters"]
        csv_bytes = (
            await client.get((await completed(client, app, csv_report["id"]))["download_url"])
        ).content
        pdf_bytes = (
            await client.get((await completed(client, app, pdf_report["id"]))["download_url"])
        ).content

    rows = parse_csv(csv_bytes)
    # Both overlap the report period (the second by its first day only).
    assert [row["declaration_id"] for row in rows] == [item["id"] for item in current]
    approved = rows[0]
    assert current[0]["status"] == "approved"  # the sandbox decides at once
    assert approved["status"] == "approved"
    assert approved["type"] == "guarantee_of_origin"
    assert approved["reference"] == "REF-2025-05-01"
    assert number(approved["energy_wh"]) == current[0]["energy_wh"]
    assert number(approved["metered_energy_wh"]) == current[0]["metered_energy_wh"]
    assert number(approved["coverage_ratio"]) == current[0]["coverage"]
    assert approved["submitted_at"] == current[0]["submitted_at"]
    steps = approved["history"].split("; ")
    assert len(steps) == len(history) >= 3
    assert [step.split(" ")[1] for step in steps] == [item["action"] for item in history]
    assert "submitted->approved" in approved["history"]
    assert rows[1]["status"] == "draft"

    pdf = pypdf.PdfReader(io.BytesIO(pdf_bytes))
    text = "\n".join(page.extract_text() for page in pdf.pages)
    assert "Declarations report" in text
    assert "dcl_" not in text  # numbered, with the customer's reference, not internal ids
    assert "key_" not in text
    assert "REF-2025-05-01" in text
    assert "approved" in text
    assert "History" in text
    assert "submitted → approved" in text
    render_first_page(pdf_bytes, "declarations.png")


async def report_rows(client: Any, url: str) -> list[dict[str, str]]:
    return parse_csv((await client.get(url)).content)


# A day of FI prices no other test imports, priced only from 10:00 local (Helsinki, UTC+2).
FI_DAY = datetime(2023, 3, 7, 22, tzinfo=UTC)


async def test_the_pdf_average_price_divides_by_priced_energy_as_the_api(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    prices = [
        ((FI_DAY + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), 30.0 + h * 2.5)
        for h in range(10, 24)
    ]
    await import_file(app, write_csv(tmp_path, "fi.csv", prices), "FI", 3600)
    params = {"from": "2023-03-08T00:00:00+02:00", "to": "2023-03-10T00:00:00+02:00"}
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Katto Helsinki", "Europe/Helsinki", 6.0, "FI")
        await upload_readings(client, system, FI_DAY, 96 * 2)
        report = await create_report(
            client, type="market_value", format="pdf", interval="1d", system_ids=[system["id"]],
            **params,
        )  # fmt: skip
        pdf_bytes = (
            await client.get((await completed(client, app, report["id"]))["download_url"])
        ).content
        api = (
            await client.get(
                f"/api/v1/systems/{system['id']}/market-value", params={**params, "interval": "1d"}
            )
        ).json()
    pages = pypdf.PdfReader(io.BytesIO(pdf_bytes)).pages
    text = " ".join(" ".join(page.extract_text() for page in pages).split())
    priced_day, unpriced_day = api["data"]
    # Half the day has a price: the average is the API's capture price, not value ÷ all energy.
    capture = priced_day["price_eur_per_mwh"]
    naive = priced_day["value_eur"] / priced_day["energy_wh"] * 1e6
    assert abs(capture - naive) > 1
    assert (
        f"2023-03-08 {priced_day['energy_wh'] / 1000:,.3f} {priced_day['value_eur']:,.2f} {capture:,.2f}"
        in text
    )
    # The day without prices has no average (—), and the total row is the range's capture price.
    assert unpriced_day["value_eur"] is None
    assert f"2023-03-09 {unpriced_day['energy_wh'] / 1000:,.3f} — —" in text
    totals = api["meta"]["totals"]
    assert (
        f"Total {totals['energy_wh'] / 1000:,.3f} {totals['value_eur']:,.2f} {totals['price_eur_per_mwh']:,.2f}"
        in text
    )
    assert "sys_" not in text
