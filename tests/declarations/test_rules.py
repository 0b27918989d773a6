"""The calendar rules with a pinned clock, events, and a simulated sandbox system."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from fastapi import FastAPI

from solarapi.declarations.metering import Metering, period_bounds, validate_period
from solarapi.errors import ValidationFailed
from solarapi.models.systems import System
from tests.declarations.factories import MAY_1, create_declaration, make_system, upload_days
from tests.support import Tenant, client_for


def _system(timezone: str) -> System:
    return System(id="sys_test", timezone=timezone)


# 2025-05-31T15:00Z is already June 1st (01:00) in Sydney but still May 31st in Amsterdam.
NOW = datetime(2025, 5, 31, 15, 0, tzinfo=UTC)


def test_before_today_is_judged_in_the_systems_zone() -> None:
    validate_period(_system("Australia/Sydney"), date(2025, 5, 1), date(2025, 5, 31), NOW)
    with pytest.raises(ValidationFailed, match=r"before today \(2025-05-31 in .*Amsterdam"):
        validate_period(_system("Europe/Amsterdam"), date(2025, 5, 1), date(2025, 5, 31), NOW)
    validate_period(_system("Europe/Amsterdam"), date(2025, 5, 1), date(2025, 5, 30), NOW)
    with pytest.raises(ValidationFailed, match="must not be after"):
        validate_period(_system("Europe/Amsterdam"), date(2025, 5, 2), date(2025, 5, 1), NOW)


def test_period_length_and_age_are_bounded() -> None:
    amsterdam = _system("Europe/Amsterdam")
    validate_period(amsterdam, date(2024, 1, 1), date(2024, 12, 31), NOW)  # 366 days
    with pytest.raises(ValidationFailed, match="367 days"):
        validate_period(amsterdam, date(2024, 1, 1), date(2025, 1, 1), NOW)
    with pytest.raises(ValidationFailed, match="1970-01-01"):
        validate_period(_system("Asia/Tokyo"), date(1, 1, 1), date(1, 1, 2), NOW)


@pytest.mark.parametrize(
    ("timezone", "first", "last", "start", "end"),
    [
        # Sydney's May (AEST, UTC+10 all month) is not the UTC month.
        ("Australia/Sydney", "2025-05-01", "2025-05-31", "2025-04-30T14:00", "2025-05-31T14:00"),
        # Amsterdam's March loses an hour on the 30th: 743 hours, not 744.
        ("Europe/Amsterdam", "2025-03-01", "2025-03-31", "2025-02-28T23:00", "2025-03-31T22:00"),
        # New York's November gains one on the 2nd.
        ("America/New_York", "2025-11-01", "2025-11-30", "2025-11-01T04:00", "2025-12-01T05:00"),
        ("UTC", "2025-05-01", "2025-05-01", "2025-05-01T00:00", "2025-05-02T00:00"),
    ],
)
def test_period_bounds_are_local_midnights(
    timezone: str, first: str, last: str, start: str, end: str
) -> None:
    start_s, end_s = period_bounds(
        _system(timezone), date.fromisoformat(first), date.fromisoformat(last)
    )
    assert datetime.fromtimestamp(start_s, UTC) == datetime.fromisoformat(f"{start}+00:00")
    assert datetime.fromtimestamp(end_s, UTC) == datetime.fromisoformat(f"{end}+00:00")


@pytest.mark.parametrize(
    ("samples", "expected", "coverage"),
    [(96, 96, 1.0), (95, 100, 0.95), (182, 192, 0.947), (2975, 2976, 0.999), (0, 96, 0.0)],
)
def test_coverage_rounds_down(samples: int, expected: int, coverage: float) -> None:
    assert Metering(1.0, samples, expected).coverage == coverage


async def test_events_for_submit_decision_and_withdraw(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 2))
        declaration = (await create_declaration(client, system["id"])).json()
        path = f"/api/v1/declarations/{declaration['id']}"
        await client.post(f"{path}/submit")
        withdrawn = (await client.post(f"{path}/withdraw")).json()
        events = (await client.get("/api/v1/events")).json()["data"]
        mine = [e for e in events if e["data"].get("id") == declaration["id"]]
        assert sorted(e["type"] for e in mine) == [
            "declaration.submitted",
            "declaration.withdrawn",
        ]
        last = next(e for e in mine if e["type"] == "declaration.withdrawn")
        assert last["data"] == withdrawn
        assert last["environment"] == "live"

    async with client_for(app, enterprise.test) as sandbox:
        system = await make_system(sandbox, data_source="metered")
        await upload_days(sandbox, system, MAY_1, date(2025, 5, 2))
        declaration = (await create_declaration(sandbox, system["id"])).json()
        await sandbox.post(f"/api/v1/declarations/{declaration['id']}/submit")
        events = (await sandbox.get("/api/v1/events")).json()["data"]
        types = sorted(e["type"] for e in events if e["data"].get("id") == declaration["id"])
        assert types == ["declaration.approved", "declaration.submitted"]


async def test_simulated_sandbox_system_can_be_declared(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        system = await make_system(client, capacity_kwp=8.0)
        assert system["data_source"] == "simulated"
        created = await create_declaration(
            client, system["id"], period_start="2025-06-01", period_end="2025-06-07"
        )
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["coverage"] == 1.0  # every simulated quarter-hour counts as a sample
        assert body["metered_energy_wh"] > 0
        readings = await client.get(
            f"/api/v1/systems/{system['id']}/readings",
            params={
                "from": "2025-06-01T00:00:00+02:00",
                "to": "2025-06-08T00:00:00+02:00",
                "interval": "1d",
            },
        )
        assert readings.json()["meta"]["totals"]["energy_wh"] == body["metered_energy_wh"]
        submitted = await client.post(f"/api/v1/declarations/{body['id']}/submit")
        assert submitted.json()["status"] == "approved"
        assert submitted.json()["certificates"] == int(body["energy_wh"] // 1_000_000)
