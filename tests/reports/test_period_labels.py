"""Report file names and PDF labels name the report's period on the systems' local calendar:
an October report of Dutch systems is 2025-10-01 to 2025-10-31, never the UTC dates
2025-09-30 … 2025-10-31, and its chart's axis never reads "Nov"."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pypdf
from fastapi import FastAPI

from solarapi.reports.calendar import local_period
from solarapi.reports.document import Chart
from solarapi.reports.pdffile import chart_figure
from tests.reports.helpers import completed, create_report, make_system, upload_readings
from tests.support import Tenant, client_for

AMSTERDAM = ZoneInfo("Europe/Amsterdam")
OCTOBER = (datetime(2025, 10, 1, tzinfo=AMSTERDAM), datetime(2025, 11, 1, tzinfo=AMSTERDAM))


def test_local_period_is_inclusive_local_days() -> None:
    period = local_period(*OCTOBER, ["Europe/Amsterdam", "Europe/Amsterdam"])
    assert (period.first, period.last, period.zone) == (
        date(2025, 10, 1),
        date(2025, 10, 31),
        "Europe/Amsterdam",
    )
    assert period.text() == "2025-10-01 to 2025-10-31 (Europe/Amsterdam)"
    # Systems in several zones: the UTC calendar.
    mixed = local_period(*OCTOBER, ["Europe/Amsterdam", "Australia/Sydney"])
    assert (mixed.first, mixed.last, mixed.zone) == (date(2025, 9, 30), date(2025, 10, 31), "UTC")
    # An end that is not a midnight keeps its own day; a one-day range is that day.
    noon = datetime(2025, 10, 3, 12, tzinfo=AMSTERDAM)
    assert local_period(OCTOBER[0], noon, ["Europe/Amsterdam"]).last == date(2025, 10, 3)
    one_day = local_period(OCTOBER[0], OCTOBER[0] + timedelta(days=1), ["Europe/Amsterdam"])
    assert one_day.first == one_day.last == date(2025, 10, 1)


def test_zones_with_the_same_clock_keep_the_local_calendar() -> None:
    # NL and DE-LU: two names, the same offsets all October (DST ends the same instant).
    shared = local_period(*OCTOBER, ["Europe/Berlin", "Europe/Amsterdam"])
    assert (shared.first, shared.last, shared.zone) == (
        date(2025, 10, 1),
        date(2025, 10, 31),
        "Europe/Amsterdam",
    )
    assert shared.text() == "2025-10-01 to 2025-10-31 (Europe/Amsterdam = Europe/Berlin)"
    # London is an hour behind all month: the UTC calendar, said so.
    london = local_period(*OCTOBER, ["Europe/Amsterdam", "Europe/London"])
    assert (london.zone, london.text().endswith("(UTC)")) == ("UTC", True)
    # Clocks that agree until one zone changes its offset on its own do not agree: New York
    # and Toronto agree; Lisbon and Casablanca (no DST) agree until 26 October 2025 only.
    assert local_period(*OCTOBER, ["America/New_York", "America/Toronto"]).zone != "UTC"
    assert local_period(*OCTOBER, ["Europe/Lisbon", "Africa/Casablanca"]).zone == "UTC"


def test_a_daily_october_chart_reads_october() -> None:
    days = [datetime(2025, 10, 1) + timedelta(days=i) for i in range(31)]
    chart = Chart(
        "Production per day, all systems",
        "Energy (kWh)",
        days,
        [float(i) for i in range(31)],
        0.8,
        [day.strftime("%Y-%m-%d") for day in days],
        "2025-10-01 to 2025-10-31 (Europe/Amsterdam)",
    )
    figure = chart_figure(chart)
    figure.canvas.draw()
    axes = figure.axes[0]
    formatter = axes.xaxis.get_major_formatter()
    offset = formatter.get_offset()  # type: ignore[attr-defined]
    labels = [tick.get_text() for tick in axes.get_xticklabels() if tick.get_text()]
    assert "Nov" not in offset + " ".join(labels), (offset, labels)
    assert "Oct" in offset + " ".join(labels)
    assert axes.get_xlabel() == "2025-10-01 to 2025-10-31 (Europe/Amsterdam)"


async def test_october_report_is_named_and_labelled_by_local_days(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        roof = await make_system(client, "Dak Utrecht", "Europe/Amsterdam", 6.0)
        await upload_readings(client, roof, OCTOBER[0].astimezone(UTC), 96 * 31)
        report = await create_report(
            client,
            type="production",
            format="pdf",
            system_ids=[roof["id"]],
            from_=OCTOBER[0].isoformat(),
            to=OCTOBER[1].isoformat(),
            interval="1d",
        )
        done = await completed(client, app, report["id"])
        response = await client.get(done["download_url"])
    assert response.status_code == 200
    disposition = response.headers["content-disposition"]
    assert f"production_2025-10-01_2025-10-31_{report['id']}.pdf" in disposition, disposition
    first_page = pypdf.PdfReader(io.BytesIO(response.content)).pages[0].extract_text()
    assert "2025-10-01 to 2025-10-31 (Europe/Amsterdam)" in first_page
    flat = " ".join(first_page.split())  # the facts cell may wrap
    assert "in UTC 2025-09-30 22:00 UTC to 2025-10-31 23:00 UTC (end exclusive)" in flat
