"""The client's portfolio reads size their pages so that a page never holds more than the
server's 100,000 buckets: a long range at a fine interval is read in pages of fewer systems,
merged as any other, equal to each system's own series."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from solarapi_client import Client
from solarapi_client.fleet import MAX_FLEET_PAGE, MAX_PAGE_BUCKETS, fitting_page
from solarapi_client.models import Location
from tests.client.conftest import Served
from tests.support import Tenant


@pytest.mark.parametrize(
    ("start", "end", "interval", "expected"),
    [
        # 99 days of 15m: 9,504 buckets (+3 for the widening) → 10 systems a page.
        ("2026-06-01T00:00:00Z", "2026-09-08T00:00:00Z", "15m", 10),
        (datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 9, 8, tzinfo=UTC), "1h", 42),
        ("2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z", "1d", MAX_FLEET_PAGE),
        ("2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z", None, MAX_FLEET_PAGE),  # 1d
        (None, "2026-07-01T00:00:00Z", "15m", MAX_FLEET_PAGE),  # the server's default range
        ("not a time", "2026-07-01T00:00:00Z", "15m", MAX_FLEET_PAGE),  # the server's 400
        ("2026-06-01T00:00:00Z", "2027-06-01T00:00:00Z", "15m", 2),
    ],
)
def test_the_page_fits_the_bucket_cap(
    start: str | datetime | None, end: str | datetime, interval: str | None, expected: int
) -> None:
    assert fitting_page(MAX_FLEET_PAGE, start, end, interval) == expected
    if start is not None and expected < MAX_FLEET_PAGE:
        # A page of that many systems fits even with every one's range widened on both ends.
        seconds = {"15m": 900, "1h": 3600}[str(interval)]
        lo = datetime.fromisoformat(start) if isinstance(start, str) else start
        hi = datetime.fromisoformat(end) if isinstance(end, str) else end
        buckets = int((hi - lo).total_seconds()) // seconds + 2
        assert expected * buckets <= MAX_PAGE_BUCKETS
        assert (expected + 1) * buckets > MAX_PAGE_BUCKETS * 0.99


def test_a_long_fine_range_is_read_in_smaller_pages(served: Served, enterprise: Tenant) -> None:
    """12 systems × 99 days of 15m (114,000 buckets) were one page the server refused ("the
    largest limit that fits … is 10"): now two pages, merged, each system equal to its own
    readings."""
    pages: list[httpx.Request] = []

    def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/portfolio/readings"):
            pages.append(request)

    http = httpx.Client(timeout=120, event_hooks={"request": [record]})
    start, end = "2026-06-01T00:00:00Z", "2026-09-08T00:00:00Z"
    with Client(api_key=enterprise.live, base_url=served.base_url, http_client=http) as client:
        roof = Location(latitude=52.0, longitude=5.0, timezone="Europe/Amsterdam")
        ids = [
            client.systems.create(name=f"roof {i}", capacity_kwp=5.0, location=roof).id
            for i in range(12)
        ]
        fleet = client.portfolio.readings(start=start, end=end, interval="15m")
        one = client.readings.get(ids[11], start=start, end=end, interval="15m")
    assert [request.url.params["limit"] for request in pages] == ["10", "10"]
    assert [item.system_id for item in fleet.data] == ids
    assert fleet.meta.totals.systems == 12
    assert len(fleet.data[11].data) == len(one.data) == 9_504
