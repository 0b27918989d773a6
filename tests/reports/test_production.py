"""Production reports: the CSV matches the readings endpoint row for row; the PDF is a real
multi-page document with a title block, a chart, tables and page numbers."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np
import pypdf
import pypdfium2
import pytest
from fastapi import FastAPI

from tests.reports.helpers import (
    JUNE_1,
    QUARTER,
    completed,
    create_report,
    make_system,
    number,
    parse_csv,
    solar_wh,
    upload_readings,
)
from tests.support import ROOT, Tenant, client_for

ARTIFACTS = ROOT / "test-artifacts" / "reports"


def render_first_page(pdf: bytes, name: str) -> Path:
    """Page 1 as a PNG, for a person to look at (and for the test to check it is not blank)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    document = pypdfium2.PdfDocument(pdf)
    try:
        image = document[0].render(scale=1.5).to_pil()
        path = ARTIFACTS / name
        image.save(path)
        # Not a blank page: enough dark pixels (text) and orange ones (the chart's bars).
        rgb = np.asarray(image.convert("RGB")).astype(int)
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        dark = int(((r < 90) & (g < 90) & (b < 90)).sum())
        orange = int(((r > 200) & (g > 120) & (g < 190) & (b < 60)).sum())
        assert dark > 2000, f"page 1 of {name} has almost no text"
        assert orange > 2000, f"page 1 of {name} has no chart bars"
    finally:
        document.close()
    return path


async def test_production_csv_matches_the_readings_endpoint(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        amsterdam = await make_system(client, "Dak Haarlem", "Europe/Amsterdam", 10.0)
        sydney = await make_system(client, '=Roof "Bondi", NSW', "Australia/Sydney", 5.0)
        await upload_readings(client, amsterdam, JUNE_1, 96 * 3, skip={100, 101, 102})
        await upload_readings(client, sydney, JUNE_1, 96 * 2)
        params = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-04T00:00:00Z", "interval": "1d"}
        # Two zones with different clocks have no one calendar: the caller chooses one.
        unchosen = await client.post(
            "/api/v1/reports",
            json={"type": "production", "format": "csv",
                  "system_ids": [amsterdam["id"], sydney["id"]], **params},
        )  # fmt: skip
        assert unchosen.status_code == 400, unchosen.text
        assert unchosen.json()["code"] == "validation"
        assert "timezone is required" in unchosen.json()["error"]
        assert "(Australia/Sydney; Europe/Amsterdam)" in unchosen.json()["error"]
        report = await create_report(
            client,
            type="production",
            format="csv",
            system_ids=[amsterdam["id"], sydney["id"]],
            timezone="Australia/Sydney",
            **params,
        )
        assert report["status"] == "queued"
        assert report["file"] is None
        assert report["download_url"] is None
        assert report["parameters"] == {
            "system_ids": [amsterdam["id"], sydney["id"]],
            "from": "2025-06-01T00:00:00Z",
            "to": "2025-06-04T00:00:00Z",
            "interval": "1d",
            "timezone": "Australia/Sydney",
        }
        early = await client.get(f"/api/v1/reports/{report['id']}/download")
        assert early.status_code == 409
        assert early.json()["code"] == "conflict"
        assert "queued" in early.json()["error"]

        done = await completed(client, app, report["id"])
        assert done["download_url"] == f"/api/v1/reports/{report['id']}/download"
        assert done["started_at"] is not None
        assert done["completed_at"] is not None
        response = await client.get(done["download_url"])
        # Sydney's own buckets are the endpoint's; Amsterdam's are Sydney's days, each the
        # endpoint's totals over that day's UTC span.
        expected = (
            await client.get(f"/api/v1/systems/{sydney['id']}/readings", params=params)
        ).json()["data"]
        rows = parse_csv(response.content)
        spans = {}
        for row in rows:
            if row["system_id"] == amsterdam["id"]:
                span = {"from": row["bucket_start_utc"], "to": row["bucket_end_utc"]}
                spans[row["bucket_start_utc"]] = (
                    await client.get(
                        f"/api/v1/systems/{amsterdam['id']}/readings",
                        params={**span, "interval": "1h"},
                    )
                ).json()["meta"]["totals"]

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith("attachment;")
    assert f"production_2025-06-01_2025-06-04_{report['id']}.csv" in disposition
    assert done["file"]["content_type"] == "text/csv; charset=utf-8"
    assert done["file"]["size_bytes"] == len(response.content)
    assert done["file"]["sha256"] == hashlib.sha256(response.content).hexdigest()

    # RFC 4180: CRLF line ends; the name with a comma and quotes is quoted, quotes doubled,
    # and its leading "=" neutralised against spreadsheet formulas.
    assert response.content.count(b"\r\n") == len(response.content.splitlines())
    assert b'"\'=Roof ""Bondi"", NSW"' in response.content
    header = response.content.split(b"\r\n", 1)[0].decode()
    assert header == (
        "system_id,system_name,timezone,bucket_start_utc,bucket_end_utc,period_local,"
        "energy_wh,power_avg_w,power_max_w,samples,expected_samples,coverage_ratio"
    )
    sydney_rows = [row for row in rows if row["system_id"] == sydney["id"]]
    assert len(sydney_rows) == len(expected)
    for row, bucket in zip(sydney_rows, expected, strict=True):
        assert row["bucket_start_utc"] == bucket["start"]
        assert row["bucket_end_utc"] == bucket["end"]
        assert number(row["energy_wh"]) == bucket["energy_wh"]
        assert number(row["power_avg_w"]) == bucket["power_avg_w"]
        assert number(row["power_max_w"]) == bucket["power_max_w"]
        assert int(row["samples"]) == bucket["samples"]
        assert int(row["expected_samples"]) == bucket["expected_samples"]
    amsterdam_rows = [row for row in rows if row["system_id"] == amsterdam["id"]]
    # Every row of both systems names the same local days, in the report's zone.
    assert (
        [row["period_local"] for row in amsterdam_rows]
        == [row["period_local"] for row in sydney_rows]
        == ["2025-06-01", "2025-06-02", "2025-06-03", "2025-06-04"]
    )
    assert {row["timezone"] for row in rows} == {"Australia/Sydney"}
    for row in amsterdam_rows:
        totals = spans[row["bucket_start_utc"]]
        assert number(row["energy_wh"]) == totals["energy_wh"]
        assert number(row["power_max_w"]) == totals["power_max_w"]
        assert int(row["samples"]) == totals["samples"]
        assert int(row["expected_samples"]) == totals["expected_samples"] == 96
    # The API's numbers are themselves right: Sydney's local days, gaps stay empty.
    assert sydney_rows[0]["bucket_start_utc"] == "2025-05-31T14:00:00Z"
    assert sydney_rows[0]["period_local"] == "2025-06-01"
    assert sydney_rows[-1]["energy_wh"] == ""  # no readings uploaded for that local day
    assert sydney_rows[-1]["coverage_ratio"] == "0.0"
    # Amsterdam's readings start at 00:00Z, ten hours into Sydney's 1 June; its three
    # missing quarter-hours (01:00Z on 2 June) fall in Sydney's 2 June.
    assert amsterdam_rows[0]["samples"] == str(96 - 40)
    assert amsterdam_rows[1]["samples"] == str(96 - 3)


async def test_production_pdf_is_a_multi_page_document(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        first = await make_system(client, "Zonnepark Flevoland", "Europe/Amsterdam", 900.0)
        second = await make_system(client, "Dach Köln-Süd", "Europe/Berlin", 12.0)
        await upload_readings(client, first, JUNE_1, 96 * 7)
        await upload_readings(client, second, JUNE_1, 96 * 7)
        report = await create_report(
            client,
            type="production",
            format="pdf",
            system_ids=[first["id"], second["id"]],
            from_="2025-06-01T00:00:00Z",
            to="2025-06-08T00:00:00Z",
            interval="1h",
        )
        done = await completed(client, app, report["id"])
        response = await client.get(done["download_url"])
        readings = (
            await client.get(
                f"/api/v1/systems/{first['id']}/readings",
                params={"from": "2025-06-01T00:00:00Z", "to": "2025-06-08T00:00:00Z",
                        "interval": "1h"},
            )
        ).json()  # fmt: skip

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.content.startswith(b"%PDF-")
    assert done["file"]["sha256"] == hashlib.sha256(response.content).hexdigest()

    pdf = pypdf.PdfReader(io.BytesIO(response.content))
    pages = len(pdf.pages)
    # 2 systems × 168 hourly buckets, plus the all-systems table: several pages of tables.
    assert pages >= 8
    first_page = pdf.pages[0].extract_text()
    assert "Production report" in first_page
    assert "Test enterprise" in first_page  # the account's name
    assert enterprise.account_id not in first_page  # no internal ids in a customer's PDF
    assert "sys_" not in "\n".join(page.extract_text() for page in pdf.pages)
    assert "Zonnepark Flevoland" in first_page
    assert "Dach Köln-Süd" in first_page  # a non-ASCII name survives
    # Amsterdam and Berlin keep the same clock: the period is in their local calendar, with UTC.
    flowing = " ".join(first_page.split())
    assert "(Europe/Amsterdam = Europe/Berlin)" in flowing
    assert "2025-06-01 00:00 UTC to 2025-06-08 00:00 UTC" in flowing
    assert "Generated at" in first_page
    assert f"Page 1 of {pages}" in first_page
    last_page = pdf.pages[-1].extract_text()
    assert f"Page {pages} of {pages}" in last_page
    text = "\n".join(page.extract_text() for page in pdf.pages)
    # The summary row of the big park shows its total in kWh, as the API computes it in Wh.
    total_kwh = readings["meta"]["totals"]["energy_wh"] / 1000
    assert f"{total_kwh:,.3f}" in text
    # Every hourly bucket of a system's detail table is there, named by its local start on
    # the report's calendar (Amsterdam's summer clock), not by its UTC start.
    assert len(re.findall(r"2025-06-0[1-8] \d\d:00 UTC\+02:00", text)) >= 3 * 168
    assert "2025-06-01 02:00 UTC+02:00" in text  # 00:00Z
    assert "2025-06-08 01:00 UTC+02:00" in text  # the last hour, 23:00Z
    render_first_page(response.content, "production-1h-two-systems.png")


def _pdf_rows(text: str, label: str) -> list[list[str]]:
    """The table rows whose first cell is `label` (a period or "Total"), as their cells
    (pypdf's layout mode keeps a row on one line)."""
    return [line.split() for line in text.splitlines() if line.strip().startswith(label + " ")]


def _cell(value: float | None, decimals: int = 3) -> str:
    return "—" if value is None else f"{value:,.{decimals}f}"


async def test_production_pdf_shows_expected_epi_and_pr_of_the_performance_endpoint(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The PDF's Expected, EPI and PR columns are `GET /performance`'s numbers for the same
    systems, period and interval: per row, per system, and over both systems (PR "—" where a
    system has no measured irradiance, never 0)."""
    params = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-04T00:00:00Z", "interval": "1d"}
    async with client_for(app, enterprise.live) as client:
        measured = await make_system(client, "Dak Haarlem", "UTC", 10.0)
        typical = await make_system(client, "Schuur Haarlem", "UTC", 4.0)
        await upload_readings(client, measured, JUNE_1, 96 * 3)
        await upload_readings(client, typical, JUNE_1, 96 * 3)
        # Plane-of-array irradiance for every quarter-hour of the measured system: a PR of
        # about 0.8 (and 0 W/m² at night).
        irradiance = [
            {
                "timestamp": (JUNE_1 + i * QUARTER).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "poa_w_m2": round(solar_wh(i, 10.0) * 4 / 10.0 / 0.8, 2),
                "ambient_temp_c": 18.0,
            }
            for i in range(96 * 3)
        ]
        uploaded = await client.post(
            f"/api/v1/systems/{measured['id']}/irradiance", json={"readings": irradiance}
        )
        assert uploaded.status_code == 200, uploaded.text
        api = {
            system["id"]: (
                await client.get(f"/api/v1/systems/{system['id']}/performance", params=params)
            ).json()
            for system in (measured, typical)
        }
        both = await create_report(
            client,
            type="production",
            format="pdf",
            system_ids=[measured["id"], typical["id"]],
            **params,
        )
        alone = await create_report(
            client, type="production", format="pdf", system_ids=[measured["id"]], **params
        )
        done = await completed(client, app, both["id"])
        pdf = (await client.get(done["download_url"])).content
        text = "\n".join(
            page.extract_text(extraction_mode="layout")
            for page in pypdf.PdfReader(io.BytesIO(pdf)).pages
        )
        done = await completed(client, app, alone["id"])
        alone_text = "\n".join(
            page.extract_text(extraction_mode="layout")
            for page in pypdf.PdfReader(
                io.BytesIO((await client.get(done["download_url"])).content)
            ).pages
        )

    render_first_page(pdf, "production-expected-pr.png")
    (ARTIFACTS / "production-expected-pr.txt").write_text(text)
    mine, other = api[measured["id"]], api[typical["id"]]
    assert all(day["performance_ratio"] is not None for day in mine["data"])
    assert all(day["performance_ratio"] is None for day in other["data"])
    assert all(day["energy_performance_index"] is not None for day in other["data"])
    assert "Expected" in text
    # Per day: the rows of the all-systems table and of each system's table, in that order;
    # the last three cells are Expected, EPI and PR.
    for i, day in enumerate(("2025-06-01", "2025-06-02", "2025-06-03")):
        rows = _pdf_rows(text, day)
        assert len(rows) == 3, rows
        fleet, first, second = (row[-3:] for row in rows)
        for cells, bucket in ((first, mine["data"][i]), (second, other["data"][i])):
            assert cells == [
                _cell(bucket["expected_energy_wh"] / 1000),
                _cell(bucket["energy_performance_index"]),
                _cell(bucket["performance_ratio"]),
            ]
        assert second[2] == "—"
        # Both systems: the expected energies add up, the EPI is Σ energy ÷ Σ expected, and
        # there is no PR while one of them has none.
        expected = mine["data"][i]["expected_energy_wh"] + other["data"][i]["expected_energy_wh"]
        energy = mine["data"][i]["energy_wh"] + other["data"][i]["energy_wh"]
        assert abs(float(fleet[0].replace(",", "")) - expected / 1000) <= 0.0011
        assert abs(float(fleet[1]) - energy / expected) <= 0.0011
        assert fleet[2] == "—"
    # The systems table: each system's totals (its row starts with its name), and the total
    # rows of both tables, without a PR.
    for first_word, body in (("Dak", mine), ("Schuur", other)):
        totals = body["meta"]["totals"]
        (row,) = [cells for cells in _pdf_rows(text, first_word) if len(cells) > 5]
        assert row[-3:] == [
            _cell(totals["expected_energy_wh"] / 1000),
            _cell(totals["energy_performance_index"]),
            _cell(totals["performance_ratio"]),
        ]
    totals = _pdf_rows(text, "Total")
    assert len(totals) == 2
    for total in totals:
        assert total[-1] == "—"
        assert float(total[-3].replace(",", "")) == pytest.approx(
            (mine["meta"]["totals"]["expected_energy_wh"]
             + other["meta"]["totals"]["expected_energy_wh"]) / 1000, abs=0.0011
        )  # fmt: skip
    # One system alone: its total rows carry its PR, as the API's totals give it.
    alone_totals = _pdf_rows(alone_text, "Total")
    assert len(alone_totals) == 2
    for total in alone_totals:
        assert total[-1] == _cell(mine["meta"]["totals"]["performance_ratio"])
        assert total[-2] == _cell(mine["meta"]["totals"]["energy_performance_index"])
