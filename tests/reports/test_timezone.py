"""A report's calendar (`timezone`): validated against the shipped tz database; the systems'
own zone when their clocks agree, else the caller must choose; the file name, the PDF's
period, the `period_local` cells and the rows all follow it, and every number still equals
the API's (over each row's UTC span when a system is bucketed on another zone)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pypdf
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from solarapi.models.reports import Report
from tests.prices.helpers import import_file, write_csv
from tests.reports.helpers import (
    completed,
    create_report,
    make_system,
    number,
    parse_csv,
    upload_readings,
)
from tests.support import Tenant, client_for

DAY = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"}
# London's October 2025: BST (+01:00) until 26 October 01:00Z, then GMT.
OCTOBER = {"from": "2025-10-01T00:00:00+01:00", "to": "2025-11-01T00:00:00Z"}
OCTOBER_UTC = datetime(2025, 9, 30, 22, tzinfo=UTC)  # Amsterdam's 1 October


async def _post(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    if "from_" in body:
        body["from"] = body.pop("from_")
    return await client.post("/api/v1/reports", json=body)


def _pdf_text(data: bytes) -> str:
    pages = pypdf.PdfReader(io.BytesIO(data)).pages
    return " ".join(" ".join(page.extract_text() for page in pages).split())


@pytest.mark.parametrize(
    ("timezone", "said"),
    [
        ("Mars/Olympus_Mons", "unknown IANA time zone 'Mars/Olympus_Mons'"),
        ("localtime", "unknown IANA time zone 'localtime'"),  # the host's, not the database's
        ("posix/Europe/Amsterdam", "unknown IANA time zone"),
        ("Europe/" + "x" * 80, "names are at most 64 characters"),
        ("", "unknown IANA time zone ''"),
    ],
)
async def test_a_timezone_outside_the_shipped_database_is_a_400(
    app: FastAPI, enterprise: Tenant, timezone: str, said: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Roof", "Europe/Amsterdam")
        refused = await _post(
            client, type="production", format="csv", timezone=timezone,
            system_ids=[system["id"]], **DAY,
        )  # fmt: skip
        # A parameter error comes before an unknown system's 404.
        before_404 = await _post(
            client, type="production", format="csv", timezone=timezone,
            system_ids=["sys_not_mine"], **DAY,
        )  # fmt: skip
        not_text = await _post(client, type="production", format="csv", timezone=5, **DAY)
        listed = (await client.get("/api/v1/reports")).json()["data"]
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "validation"
    assert refused.json()["error"].startswith("timezone: ")
    assert said in refused.json()["error"]
    assert "Europe/Amsterdam" in refused.json()["error"]  # what a valid name looks like
    assert before_404.status_code == 400
    assert (not_text.status_code, not_text.json()["code"]) == (400, "validation")
    assert "timezone" in not_text.json()["error"]
    assert listed == []  # nothing was stored


async def test_without_timezone_the_systems_shared_clock_is_the_calendar(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        amsterdam = await make_system(client, "Dak", "Europe/Amsterdam")
        berlin = await make_system(client, "Dach", "Europe/Berlin")
        london = await make_system(client, "Roof", "Europe/London")
        # NL and DE-LU: two names, one clock. The zone that sorts first names the calendar.
        shared = await create_report(
            client, type="production", format="csv",
            system_ids=[berlin["id"], amsterdam["id"]], **OCTOBER,
        )  # fmt: skip
        alone = await create_report(
            client, type="declarations", format="csv", system_ids=[london["id"]], **OCTOBER
        )
        # Amsterdam and London differ by an hour all month: no one calendar, so 400 ...
        mixed = await _post(
            client, type="production", format="pdf",
            system_ids=[amsterdam["id"], london["id"]], **OCTOBER,
        )  # fmt: skip
        # ... for the default system list too (every system of the environment).
        everyone = await _post(client, type="production", format="pdf", **OCTOBER)
        chosen = await create_report(
            client, type="production", format="csv", timezone="UTC", **OCTOBER
        )
    assert shared["parameters"]["timezone"] == "Europe/Amsterdam"
    assert alone["parameters"]["timezone"] == "Europe/London"
    assert mixed.status_code == 400, mixed.text
    assert mixed.json() == {
        "error": "timezone is required: the report's systems are in time zones whose clocks "
        "differ during the period (Europe/Amsterdam; Europe/London), so no one local calendar "
        "fits them all; choose the report's calendar with timezone, an IANA name such as "
        "'Europe/Amsterdam' or 'UTC'",
        "code": "validation",
    }
    assert everyone.status_code == 400
    assert "(Europe/Amsterdam = Europe/Berlin; Europe/London)" in everyone.json()["error"]
    assert chosen["parameters"]["timezone"] == "UTC"
    assert chosen["parameters"]["system_ids"] == [amsterdam["id"], berlin["id"], london["id"]]


async def test_a_chosen_timezone_names_the_file_the_pdf_and_every_row_as_the_api(
    app: FastAPI, enterprise: Tenant
) -> None:
    """An Amsterdam and a London roof, reported on London's October: London's rows are its
    own buckets; Amsterdam's are London's days, each equal to the readings endpoint's totals
    over the day's UTC span; the PDF's per-day table adds them up."""
    async with client_for(app, enterprise.live) as client:
        amsterdam = await make_system(client, "Dak Haarlem", "Europe/Amsterdam", 6.0)
        london = await make_system(client, "Roof Camden", "Europe/London", 4.0)
        await upload_readings(client, amsterdam, OCTOBER_UTC, 96 * 32)
        await upload_readings(client, london, OCTOBER_UTC, 96 * 32, skip={500, 501})
        ids = [amsterdam["id"], london["id"]]
        common = {"type": "production", "system_ids": ids, "timezone": "Europe/London"}
        csv_report = await create_report(client, format="csv", interval="1d", **common, **OCTOBER)
        pdf_report = await create_report(client, format="pdf", interval="1d", **common, **OCTOBER)
        hourly = await create_report(
            client, format="csv", interval="1h", **common,
            **{"from": "2025-10-25T22:00:00Z", "to": "2025-10-26T03:00:00Z"},
        )  # fmt: skip
        csv_response = await client.get(
            (await completed(client, app, csv_report["id"]))["download_url"]
        )
        pdf_response = await client.get(
            (await completed(client, app, pdf_report["id"]))["download_url"]
        )
        hourly_rows = parse_csv(
            (await client.get((await completed(client, app, hourly["id"]))["download_url"])).content
        )
        rows = parse_csv(csv_response.content)
        london_api = (
            await client.get(
                f"/api/v1/systems/{london['id']}/readings", params={**OCTOBER, "interval": "1d"}
            )
        ).json()["data"]
        spans: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["system_id"] == amsterdam["id"]:
                spans[row["bucket_start_utc"]] = (
                    await client.get(
                        f"/api/v1/systems/{amsterdam['id']}/readings",
                        params={"from": row["bucket_start_utc"], "to": row["bucket_end_utc"],
                                "interval": "1h"},
                    )
                ).json()["meta"]["totals"]  # fmt: skip

    days = [f"2025-10-{day:02d}" for day in range(1, 32)]
    # The file name and the PDF's period: London's first and last day.
    for response, report, ext in ((csv_response, csv_report, "csv"), (pdf_response, pdf_report, "pdf")):  # fmt: skip
        name = f"production_2025-10-01_2025-10-31_{report['id']}.{ext}"
        assert name in response.headers["content-disposition"]
    london_rows = [row for row in rows if row["system_id"] == london["id"]]
    amsterdam_rows = [row for row in rows if row["system_id"] == amsterdam["id"]]
    # period_local: London's days for both systems, and the rows are London's days.
    assert [row["period_local"] for row in london_rows] == days
    assert [row["period_local"] for row in amsterdam_rows] == days
    assert {row["timezone"] for row in rows} == {"Europe/London"}
    assert amsterdam_rows[0]["bucket_start_utc"] == "2025-09-30T23:00:00Z"  # London midnight
    assert amsterdam_rows[25]["bucket_end_utc"] == "2025-10-27T00:00:00Z"  # a 25-hour day
    assert int(amsterdam_rows[25]["expected_samples"]) == 100
    for row, bucket in zip(london_rows, london_api, strict=True):
        assert (row["bucket_start_utc"], row["bucket_end_utc"]) == (bucket["start"], bucket["end"])
        assert number(row["energy_wh"]) == bucket["energy_wh"]
        assert int(row["samples"]) == bucket["samples"]
    for row in amsterdam_rows:
        totals = spans[row["bucket_start_utc"]]
        assert number(row["energy_wh"]) == totals["energy_wh"]
        assert number(row["power_max_w"]) == totals["power_max_w"]
        assert (int(row["samples"]), int(row["expected_samples"])) == (
            totals["samples"],
            totals["expected_samples"],
        )

    text = _pdf_text(pdf_response.content)
    assert "2025-10-01 to 2025-10-31 (Europe/London)" in text
    assert "sys_" not in text
    # The all-systems row of each day: the two systems' energies of that London day, in kWh.
    for day, mine, theirs in zip(days, london_api, amsterdam_rows, strict=True):
        energy = mine["energy_wh"] + number(theirs["energy_wh"])  # type: ignore[operator]
        assert f"{day} {energy / 1000:,.3f}" in text, day

    # Hours are named by London's clock with the offset in force: the repeated 01:00 is two.
    labels = [row["period_local"] for row in hourly_rows if row["system_id"] == london["id"]]
    assert labels == [
        "2025-10-25 23:00 UTC+01:00",
        "2025-10-26 00:00 UTC+01:00",
        "2025-10-26 01:00 UTC+01:00",
        "2025-10-26 01:00 UTC+00:00",
        "2025-10-26 02:00 UTC+00:00",
    ]


# Two days of SE3 prices no other test imports, hourly on the UTC hour.
SE3_START = datetime(2024, 4, 15, 22, tzinfo=UTC)


def se3_price(hour: int) -> float:
    return round(25.0 + (hour % 24) * 2.75 - (40.0 if 10 <= hour % 24 <= 13 else 0.0), 2)


async def test_a_market_value_on_another_calendar_prices_each_row_as_the_api(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    prices = [
        ((SE3_START + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), se3_price(h))
        for h in range(50)
    ]
    await import_file(app, write_csv(tmp_path, "se3.csv", prices), "SE3", 3600)
    # London's 16 and 17 April (BST): Stockholm is an hour ahead.
    period = {"from": "2024-04-16T00:00:00+01:00", "to": "2024-04-18T00:00:00+01:00"}
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Tak Solna", "Europe/Stockholm", 7.0, "SE3")
        await upload_readings(client, system, SE3_START, 96 * 2 + 8)
        common = {"type": "market_value", "system_ids": [system["id"]], "interval": "1d"}
        csv_report = await create_report(
            client, format="csv", timezone="Europe/London", **common, **period
        )
        pdf_report = await create_report(
            client, format="pdf", timezone="Europe/London", **common, **period
        )
        csv_response = await client.get(
            (await completed(client, app, csv_report["id"]))["download_url"]
        )
        pdf_response = await client.get(
            (await completed(client, app, pdf_report["id"]))["download_url"]
        )
        rows = parse_csv(csv_response.content)
        api = [
            (
                await client.get(
                    f"/api/v1/systems/{system['id']}/market-value",
                    params={"from": row["bucket_start_utc"], "to": row["bucket_end_utc"],
                            "interval": "1h"},
                )
            ).json()["meta"]["totals"]
            for row in rows
        ]  # fmt: skip

    assert [row["period_local"] for row in rows] == ["2024-04-16", "2024-04-17"]
    assert [row["bucket_start_utc"] for row in rows] == [
        "2024-04-15T23:00:00Z",
        "2024-04-16T23:00:00Z",
    ]
    text = _pdf_text(pdf_response.content)
    assert "2024-04-16 to 2024-04-17 (Europe/London)" in text
    assert (
        f"market_value_2024-04-16_2024-04-17_{pdf_report['id']}.pdf"
        in (pdf_response.headers["content-disposition"])
    )
    for row, totals in zip(rows, api, strict=True):
        assert number(row["energy_wh"]) == totals["energy_wh"]
        assert number(row["value_eur"]) == pytest.approx(totals["value_eur"], abs=1e-4)
        assert number(row["price_eur_per_mwh"]) == pytest.approx(
            totals["price_eur_per_mwh"], abs=1e-3
        )
        # The PDF's row of that day: kWh, euros to the cent, the API's capture price.
        assert (
            f"{row['period_local']} {totals['energy_wh'] / 1000:,.3f} "
            f"{totals['value_eur']:,.2f} {totals['price_eur_per_mwh']:,.2f}"
        ) in text, row["period_local"]


async def test_the_file_name_is_fixed_at_post_time(app: FastAPI, enterprise: Tenant) -> None:
    """The calendar is stored with the report: moving a system to another zone afterwards
    does not rename its file. A report stored before `timezone` existed still takes its
    systems' zone."""
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Dak", "Europe/Amsterdam")
        await upload_readings(client, system, OCTOBER_UTC, 96)
        report = await create_report(
            client, type="production", format="csv", system_ids=[system["id"]],
            **{"from": "2025-10-01T00:00:00+02:00", "to": "2025-10-02T00:00:00+02:00"},
        )  # fmt: skip
        done = await completed(client, app, report["id"])
        moved = await client.patch(
            f"/api/v1/systems/{system['id']}",
            json={"location": {"timezone": "America/New_York"}},
        )
        assert moved.status_code == 200, moved.text
        kept = (await client.get(done["download_url"])).headers["content-disposition"]
        async with app.state.sessionmaker() as session, session.begin():
            old_style = {k: v for k, v in report["parameters"].items() if k != "timezone"}
            await session.execute(
                update(Report).where(Report.id == report["id"]).values(parameters=old_style)
            )
        legacy = (await client.get(done["download_url"])).headers["content-disposition"]
    assert f"production_2025-10-01_2025-10-01_{report['id']}.csv" in kept
    # New York's calendar: 30 September 18:00 to 1 October 18:00 local.
    assert f"production_2025-09-30_2025-10-01_{report['id']}.csv" in legacy


async def test_a_range_over_the_cap_on_the_reports_grid_is_a_400_not_a_failed_report(
    app: FastAPI, enterprise: Tenant
) -> None:
    """10,000 UTC hours are 10,001 of Kathmandu's (each starts at :15 UTC): on the report's
    calendar the range is over the bucket cap, which the request is told at once, with the
    largest `to` of that grid — which is then accepted."""
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Kathmandu", "Asia/Kathmandu")
        body = {"type": "production", "format": "csv", "interval": "1h",
                "system_ids": [system["id"]], "from_": "2024-01-01T00:00:00Z"}  # fmt: skip
        over = await _post(client, **body, to="2025-02-20T16:00:00Z")
        assert over.status_code == 400, over.text
        assert over.json()["code"] == "validation"
        assert "the largest allowed 'to' is 2025-02-20T15:15:00Z" in over.json()["error"]
        fits = await _post(client, **body, to="2025-02-20T15:15:00Z")
        assert fits.status_code == 202, fits.text


async def test_a_range_just_over_the_cap_on_utc_is_the_reports_calendars_to_judge(
    app: FastAPI, enterprise: Tenant
) -> None:
    """10,000 of Kathmandu's hours (from and to at :15 UTC, its hours' edges) are 10,001 UTC
    hours: the report, bucketed on Kathmandu's clock, holds 10,000 and is accepted (it was
    refused at the POST naming the UTC grid's `to`). One local hour more is refused naming
    Kathmandu's largest `to`; a range far over the cap is still refused before its systems are
    read (an unknown system: the 400, not the 404)."""
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, "Kathmandu", "Asia/Kathmandu")
        body = {"type": "production", "format": "csv", "interval": "1h",
                "system_ids": [system["id"]], "from_": "2024-01-01T00:15:00Z"}  # fmt: skip
        exact = await _post(client, **body, to="2025-02-20T16:15:00Z")  # + 10,000 hours
        assert exact.status_code == 202, exact.text
        over = await _post(client, **body, to="2025-02-20T17:15:00Z")
        assert over.status_code == 400, over.text
        assert "the largest allowed 'to' is 2025-02-20T16:15:00Z" in over.json()["error"]
        far = await _post(
            client, **{**body, "system_ids": ["sys_not_here"]}, to="2026-01-01T00:00:00Z"
        )
        assert far.status_code == 400, far.text
        assert "more than the 10,000 allowed" in far.json()["error"]
        near_unknown = await _post(
            client, **{**body, "system_ids": ["sys_not_here"]}, to="2025-02-20T16:15:00Z"
        )
        assert near_unknown.status_code == 404, near_unknown.text
        done = await completed(client, app, exact.json()["id"])
        csv = (await client.get(done["download_url"])).content.decode()
    rows = [line for line in csv.splitlines() if line.startswith(system["id"])]
    assert len(rows) == 10_000
