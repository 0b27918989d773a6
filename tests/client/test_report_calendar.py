"""The client asks for a report's calendar (`timezone`) when its systems' clocks differ: the
sandbox's Amsterdam, Berlin and Sydney systems."""

from __future__ import annotations

import pytest

from solarapi_client import Client, ValidationError
from tests.client.conftest import Served
from tests.support import Tenant

PERIOD = {"start": "2025-06-01T00:00:00Z", "end": "2025-06-03T00:00:00Z"}


def test_a_sandbox_report_names_its_calendar(served: Served, enterprise: Tenant) -> None:
    with Client(api_key=enterprise.test, base_url=served.base_url) as sandbox:
        with pytest.raises(ValidationError) as refused:
            sandbox.reports.create(type="production", format="csv", **PERIOD)
        report = sandbox.reports.create(
            type="production", format="csv", timezone="Australia/Sydney", **PERIOD
        )
        done = sandbox.reports.wait(report.id)
        rows = sandbox.reports.download(report.id).decode().splitlines()
    assert "timezone is required" in refused.value.message
    assert report.parameters["timezone"] == "Australia/Sydney"
    assert done.status == "completed"
    # Three systems × Sydney's 1, 2 and 3 June (the range ends at 10:00 on the 3rd there).
    assert len(rows) == 1 + 3 * 3
    assert {row.split(",")[5] for row in rows[1:]} == {"2025-06-01", "2025-06-02", "2025-06-03"}
