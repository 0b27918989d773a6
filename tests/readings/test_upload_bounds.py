"""Bounds of an upload that were silent or wrong (issue 28, items 8, 14, 18, 22): each is a
clear 400 naming the item, and nothing is stored. Both databases for the HTTP cases."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.kit.timefmt import TimestampError, parse_timestamp
from solarapi.readings.upload import plausible_max_w, plausible_max_wh
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, upload

STAMP = "2025-06-15T10:15:00Z"


async def _refused(app: FastAPI, tenant: Tenant, item: dict[str, Any], **system: Any) -> str:
    async with client_for(app, tenant.live) as client:
        created = await create_system(client, **system)
        response = await upload(client, created["id"], [item])
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "validation"
        again = await client.get(f"/api/v1/systems/{created['id']}")
    assert again.json()["first_reading_at"] is None  # nothing stored
    return str(response.json()["error"])


async def test_power_has_an_upper_bound(app: FastAPI, enterprise: Tenant) -> None:
    """1e308 W was stored (buckets then showed power_max_w null, totals 1e+308)."""
    error = await _refused(
        app, enterprise, {"timestamp": STAMP, "energy_wh": 1.0, "power_w": 1e308}
    )
    assert error.startswith("readings[0].power_w: 1e+308 W is implausible for a 8.4 kWp system")
    assert "at most 12600.0 W = capacity_kwp × 1000 × 1.5" in error


async def test_the_exact_power_cap_is_accepted(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        item = {"timestamp": STAMP, "energy_wh": 1.0, "power_w": 12600.0}
        assert (await upload(client, system_id, [item])).status_code == 200


async def test_the_exact_energy_cap_is_accepted(app: FastAPI, enterprise: Tenant) -> None:
    """1.001 kWp: 375.375 Wh was refused "at most 375.375 Wh" (float arithmetic)."""
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, capacity_kwp=1.001))["id"]
        exact = await upload(client, system_id, [{"timestamp": STAMP, "energy_wh": 375.375}])
        assert exact.status_code == 200, exact.text
        over = await upload(client, system_id, [{"timestamp": STAMP, "energy_wh": 375.376}])
    assert over.status_code == 400
    assert "(at most 375.375 Wh = capacity_kwp × 250 × 1.5)" in over.json()["error"]


def test_every_documented_cap_is_accepted_exactly() -> None:
    """0.001 to 99.999 kWp in steps of 0.001: the cap written in decimals is accepted, the
    next number written with one more decimal digit is not (741 were refused before)."""
    for thousandths in range(1, 100_000):
        capacity = Decimal(thousandths) / 1000
        cap_wh = capacity * 375
        assert float(str(cap_wh)) <= plausible_max_wh(float(capacity))
        assert float(str(cap_wh + Decimal("0.0001"))) > plausible_max_wh(float(capacity))
        assert float(str(capacity * 1500)) <= plausible_max_w(float(capacity))


@pytest.mark.parametrize(
    "stamp",
    [
        "٢٠٢٥-06-15T10:15:00Z",  # Arabic-Indic digits
        "2025-06-15T10:15:00Z ",
        " 2025-06-15T10:15:00Z",
        "2025-06-15T10:15:00Z\n",
    ],
)
async def test_non_rfc3339_timestamps_are_refused(
    app: FastAPI, enterprise: Tenant, stamp: str
) -> None:
    error = await _refused(app, enterprise, {"timestamp": stamp, "energy_wh": 1.0})
    assert "readings[0].timestamp:" in error
    assert "is not an RFC 3339 timestamp" in error


@pytest.mark.parametrize("fraction", ["0000001", "00000001", "000000001", "9999999"])
async def test_fractions_finer_than_a_microsecond_are_not_aligned(
    app: FastAPI, enterprise: Tenant, fraction: str
) -> None:
    """7–9 fraction digits were truncated, so 10:15:00.0000001 passed as aligned."""
    stamp = f"2025-06-15T10:15:00.{fraction}Z"
    error = await _refused(app, enterprise, {"timestamp": stamp, "energy_wh": 1.0})
    assert "is not the start of a quarter-hour" in error


def test_nine_zero_fraction_digits_are_the_whole_second() -> None:
    assert parse_timestamp("2025-06-15T10:15:00.000000000Z").microsecond == 0


@pytest.mark.parametrize(
    "text", ["2025-02-30T10:15:00Z", "2025-13-01T00:00:00Z", "2025-06-15T24:00:00Z"]
)
def test_invalid_dates_are_described_without_python_words(text: str) -> None:
    with pytest.raises(TimestampError) as caught:
        parse_timestamp(text)
    message = str(caught.value)
    assert "is not a valid date and time: the month must be 01–12" in message
    assert "isoformat" not in message
    assert "out of range" not in message


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_the_parser_accepts_only_ascii_rfc3339(text: str) -> None:
    try:
        value = parse_timestamp(text)
    except TimestampError as exc:
        message = str(exc)
    else:
        message = ""
        assert text.isascii()
        assert text == text.strip()
        assert value.tzinfo is not None
    assert "isoformat" not in message


@pytest.mark.parametrize(
    ("readings", "message"),
    [
        ([], "readings must hold 1 to 10,000 items; got 0"),
        ([{"timestamp": "2025-06-15T10:07:00Z", "energy_wh": 1.0}], "readings[0].timestamp"),
        ([{"timestamp": STAMP, "energy_wh": -1.0}], "readings[0].energy_wh: must be ≥ 0"),
        ([{"timestamp": STAMP, "energy_wh": 1.0}] * 2, "readings[1].timestamp"),
    ],
    ids=["empty", "misaligned", "negative", "repeated"],
)
async def test_a_batch_no_system_would_take_is_400_before_an_unknown_system_is_404(
    app: FastAPI, enterprise: Tenant, readings: list[dict[str, Any]], message: str
) -> None:
    """The contract's order of checks (400 validation before 404 existence): the batch's
    rules that need no system are checked for a system that is not the caller's too — an
    unknown id, another account's or the other environment's."""
    async with client_for(app, enterprise.live) as client:
        mine = (await create_system(client))["id"]
    async with client_for(app, enterprise.test) as client:
        other_environment = (await create_system(client))["id"]
    for key, system_id in (
        (enterprise.live, "sys_nope"),
        (enterprise.live, other_environment),
        (enterprise.test, mine),
    ):
        async with client_for(app, key) as client:
            response = await client.post(
                f"/api/v1/systems/{system_id}/readings", json={"readings": readings}
            )
        assert response.status_code == 400, (system_id, response.text)
        assert message in response.json()["error"], response.text


async def test_a_batch_only_its_system_could_refuse_is_404_for_an_unknown_one(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A well-formed batch, or one whose energy only the system's capacity bounds, to a system
    that is not the caller's: 404 (the capacity is the system's to say)."""
    async with client_for(app, enterprise.live) as client:
        for energy_wh in (1.0, 1e12):
            response = await upload(
                client, "sys_nope", [{"timestamp": STAMP, "energy_wh": energy_wh}]
            )
            assert response.status_code == 404, response.text
            assert response.json() == {"error": "No system with id 'sys_nope'", "code": "not_found"}
