"""Demo prices: a year for a zone, hourly before the 15-minute market and quarter-hourly
after, idempotent, and never over imported prices."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI

from solarapi.kit.zones import ZONES
from solarapi.prices.demo import ensure_demo_prices
from tests.prices.helpers import import_file, stored_rows, utc, write_csv
from tests.support import Tenant, client_for

NOW = datetime(2025, 12, 1, 9, 30, tzinfo=UTC)


async def test_demo_prices_fill_a_year_once_around_imports(
    app: FastAPI, pro: Tenant, tmp_path: Path
) -> None:
    imported = [(f"2025-06-10T{h:02d}:00:00+03:00", 1000.0 + h) for h in range(24)]
    await import_file(app, write_csv(tmp_path, "fi.csv", imported), "FI")

    async with app.state.sessionmaker() as session, session.begin():
        first = await ensure_demo_prices(session, ZONES["FI"], NOW)
    async with app.state.sessionmaker() as session, session.begin():
        again = await ensure_demo_prices(session, ZONES["FI"], NOW)
    assert first > 0
    assert again == 0

    # Helsinki days from 2024-12-01 to the end of 2025-12-02 (tomorrow of NOW).
    rows = await stored_rows(app, "FI", utc("2024-11-30T00:00:00Z"), utc("2025-12-04T00:00:00Z"))
    assert rows[0][0] == utc("2024-11-30T22:00:00Z")
    assert rows[-1][0].timestamp() + rows[-1][1] == utc("2025-12-02T22:00:00Z").timestamp()
    switch = utc("2025-09-30T22:00:00Z")
    assert {length for start, length, _, _ in rows if start < switch} == {3600}
    assert {length for start, length, _, _ in rows if start >= switch} == {900}
    assert (
        sum(length for _, length, _, _ in rows)
        == (utc("2025-12-02T22:00:00Z") - utc("2024-11-30T22:00:00Z")).total_seconds()
    )
    # The imported day is untouched and still says where it came from.
    june_10 = [
        row for row in rows if utc("2025-06-09T21:00:00Z") <= row[0] < utc("2025-06-10T21:00:00Z")
    ]
    assert [(price, source) for _, _, price, source in june_10] == [
        (1000.0 + h, "csv") for h in range(24)
    ]

    async with client_for(app, pro.live) as client:
        response = await client.get(
            "/api/v1/market-prices",
            params={
                "zone": "FI",
                "interval": "1d",
                "from": "2024-12-01T00:00:00+02:00",
                "to": "2025-12-03T00:00:00+02:00",
            },
        )
    body = response.json()
    assert len(body["data"]) == 367
    assert all(item["price_eur_per_mwh"] is not None for item in body["data"])
    assert body["meta"]["source"] == "simulated"
