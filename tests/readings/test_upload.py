"""`POST /systems/{id}/readings`: validation, atomicity, idempotent upsert, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from solarapi.kit.timefmt import utcnow
from solarapi.readings.upload import batch_from_json, upload_readings
from solarapi.systems import repository as systems
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, quarter_series, upload

JUNE = datetime(2025, 6, 15, tzinfo=UTC)


async def _day_total(client: Any, system_id: str, day: str) -> Any:
    response = await client.get(
        f"/api/v1/systems/{system_id}/readings",
        params={"from": f"{day}T00:00:00Z", "to": f"{day}T23:00:00Z", "interval": "1d"},
    )
    assert response.status_code == 200, response.text
    return response.json()["meta"]["totals"]


async def test_upload_counts_and_reupload_replaces(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        first = await upload(client, system_id, quarter_series(JUNE + timedelta(hours=10), 8, 100))
        # 4 of these overlap the first batch and replace their values.
        second = await upload(
            client, system_id, quarter_series(JUNE + timedelta(hours=11), 6, 250.5, 1000)
        )
        readings = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={
                "from": iso(JUNE + timedelta(hours=10)),
                "to": iso(JUNE + timedelta(hours=13)),
                "interval": "15m",
            },
        )
    assert first.status_code == 200
    assert first.json() == {"received": 8, "inserted": 8, "updated": 0}
    assert second.json() == {"received": 6, "inserted": 2, "updated": 4}
    energies = [bucket["energy_wh"] for bucket in readings.json()["data"]]
    assert energies == [100.0] * 4 + [250.5] * 6 + [None] * 2
    powers = [bucket["power_max_w"] for bucket in readings.json()["data"]]
    assert powers == [None] * 4 + [1000.0] * 6 + [None] * 2


async def test_same_values_again_count_as_updated(app: FastAPI, enterprise: Tenant) -> None:
    batch = quarter_series(JUNE, 3, 10)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, batch)
        again = await upload(client, system_id, batch)
    assert again.json() == {"received": 3, "inserted": 0, "updated": 3}


async def test_rollups_follow_replaced_values(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(JUNE + timedelta(hours=8), 16, 100))
        before = await _day_total(client, system_id, "2025-06-15")
        await upload(client, system_id, quarter_series(JUNE + timedelta(hours=8), 4, 10))
        after = await _day_total(client, system_id, "2025-06-15")
        hourly = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": "2025-06-15T08:00:00Z", "to": "2025-06-15T12:00:00Z"},
        )
    assert before["energy_wh"] == 1600.0
    assert after["energy_wh"] == 1600.0 - 4 * 90
    assert [b["energy_wh"] for b in hourly.json()["data"]] == [40.0, 400.0, 400.0, 400.0]


async def test_one_bad_item_stores_nothing(app: FastAPI, enterprise: Tenant) -> None:
    batch = quarter_series(JUNE, 10, 100)
    batch[3]["energy_wh"] = -1
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(client, system_id, batch)
        totals = await _day_total(client, system_id, "2025-06-15")
        system = (await client.get(f"/api/v1/systems/{system_id}")).json()
    assert response.status_code == 400
    assert response.json() == {
        "error": "readings[3].energy_wh: must be ≥ 0; got -1.0",
        "code": "validation",
    }
    assert totals["energy_wh"] is None
    assert totals["samples"] == 0
    assert system["last_reading_at"] is None


def _item(timestamp: str, energy_wh: Any = 10.0, **extra: Any) -> dict[str, Any]:
    return {"timestamp": timestamp, "energy_wh": energy_wh, **extra}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            _item("2025-06-15T10:15:00"),
            "readings[1].timestamp: '2025-06-15T10:15:00' has no time zone",
        ),
        (
            _item("2025-06-15T10:10:00Z"),
            "readings[1].timestamp: '2025-06-15T10:10:00Z' is not the start of a quarter-hour",
        ),
        (_item("2025-06-15T10:15:30Z"), "is not the start of a quarter-hour"),
        (_item("2025-06-15T10:15:00.5Z"), "is not the start of a quarter-hour"),
        (_item("2025-06-15T10:15:00+05:50"), "is not the start of a quarter-hour"),
        (_item("yesterday"), "readings[1].timestamp: 'yesterday' is not an RFC 3339 timestamp"),
        (
            _item("2025-06-15T10:15:00Z", 3150.001),
            "readings[1].energy_wh: 3150.001 Wh in 15 minutes is implausible for a 8.4 kWp system (at most 3150.0 Wh",
        ),
        (_item("2025-06-15T10:15:00Z", "12"), "readings[1].energy_wh"),
        (_item("2025-06-15T10:15:00Z", True), "readings[1].energy_wh"),
        (_item("2025-06-15T10:15:00Z", None), "readings[1].energy_wh"),
        (_item("2025-06-15T10:15:00Z", power_w=-5), "readings[1].power_w: must be ≥ 0"),
        (_item("2025-06-15T10:15:00Z", voltage=230), "readings[1].voltage: unknown field"),
        ({"energy_wh": 1.0}, "readings[1].timestamp: is required"),
    ],
)
async def test_item_validation_names_index_and_field(
    app: FastAPI, enterprise: Tenant, bad: dict[str, Any], message: str
) -> None:
    batch = [_item("2025-06-15T10:00:00Z"), bad, _item("2025-06-15T10:30:00Z")]
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(client, system_id, batch)
        totals = await _day_total(client, system_id, "2025-06-15")
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert message in response.json()["error"]
    assert totals["samples"] == 0


async def test_offsets_are_converted_before_alignment(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(
            client,
            system_id,
            [_item("2025-06-15T12:15:00+02:00", 1), _item("2025-06-15T16:15:00+05:30", 2)],
        )
        data = (
            await client.get(
                f"/api/v1/systems/{system_id}/readings",
                params={
                    "from": "2025-06-15T10:15:00Z",
                    "to": "2025-06-15T10:45:00Z",
                    "interval": "15m",
                },
            )
        ).json()["data"]
    assert response.json()["inserted"] == 2
    # 12:15+02:00 is 10:15Z; 16:15+05:30 is 10:45Z (outside the queried range).
    assert [(b["start"], b["energy_wh"]) for b in data] == [
        ("2025-06-15T10:15:00Z", 1.0),
        ("2025-06-15T10:30:00Z", None),
    ]


async def test_duplicate_names_the_second_occurrence(app: FastAPI, enterprise: Tenant) -> None:
    batch = [
        _item("2025-06-15T10:00:00Z"),
        _item("2025-06-15T10:15:00Z"),
        _item("2025-06-15T12:00:00+02:00"),  # the same instant as readings[0]
    ]
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(client, system_id, batch)
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "readings[2].timestamp: 2025-06-15T10:00:00Z repeats readings[0].timestamp"
    )


async def test_interval_must_have_ended(app: FastAPI, enterprise: Tenant) -> None:
    now = datetime.now(UTC)
    current = now - timedelta(
        minutes=now.minute % 15, seconds=now.second, microseconds=now.microsecond
    )
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        running = await upload(client, system_id, [_item(iso(current))])
        ended = await upload(client, system_id, [_item(iso(current - timedelta(minutes=15)))])
    assert running.status_code == 400
    assert "has not ended yet" in running.json()["error"]
    assert ended.status_code == 200


@pytest.mark.parametrize("count", [0, 10_001])
async def test_batch_size_limits(app: FastAPI, enterprise: Tenant, count: int) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(
            client, system_id, quarter_series(JUNE - timedelta(days=200), count)
        )
    assert response.status_code == 400
    assert f"readings must hold 1 to 10,000 items; got {count:,}" in response.json()["error"]


async def test_full_batch_of_ten_thousand(app: FastAPI, enterprise: Tenant) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, capacity_kwp=100))["id"]
        response = await upload(client, system_id, quarter_series(start, 10_000, 5.5, 20))
        month = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": "2024-01-01T00:00:00Z", "to": "2024-05-01T00:00:00Z", "interval": "1M"},
        )
    assert response.json() == {"received": 10_000, "inserted": 10_000, "updated": 0}
    assert month.json()["meta"]["totals"]["samples"] == 10_000
    assert month.json()["meta"]["totals"]["energy_wh"] == 55_000.0


async def test_simulated_system_refuses_uploads(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(client, system_id, quarter_series(JUNE, 1))
    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert "simulated" in response.json()["error"]


async def test_pro_cannot_upload(app: FastAPI, enterprise: Tenant, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        response = await upload(client, "sys_whatever", quarter_series(JUNE, 1))
    assert response.status_code == 403


async def test_non_json_body_is_refused(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await client.post(
            f"/api/v1/systems/{system_id}/readings",
            content=b'{"readings": [',
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]


async def test_concurrent_uploads_keep_rollups_exact(app: FastAPI, enterprise: Tenant) -> None:
    """Two uploads of the same new quarter-hours at once: the system lock orders them, so
    one inserts and the other updates, and the rollups equal the raw readings (without the
    lock both would add their sums to the rollups)."""
    import asyncio

    start = JUNE + timedelta(hours=6)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        responses = await asyncio.gather(
            upload(client, system_id, quarter_series(start, 96, 10.0)),
            upload(client, system_id, quarter_series(start, 96, 30.0)),
        )
        params = {"from": iso(start), "to": iso(start + timedelta(hours=24))}
        fine = await client.get(
            f"/api/v1/systems/{system_id}/readings", params={**params, "interval": "15m"}
        )
        hourly = await client.get(
            f"/api/v1/systems/{system_id}/readings", params={**params, "interval": "1h"}
        )
        daily = await client.get(
            f"/api/v1/systems/{system_id}/readings", params={**params, "interval": "1d"}
        )
    counts = sorted((r.json()["inserted"], r.json()["updated"]) for r in responses)
    assert counts == [(0, 96), (96, 0)]
    raw_total = fine.json()["meta"]["totals"]["energy_wh"]
    assert raw_total in (960.0, 2880.0)
    assert hourly.json()["meta"]["totals"]["energy_wh"] == raw_total
    assert hourly.json()["meta"]["totals"]["samples"] == 96
    assert daily.json()["meta"]["totals"]["energy_wh"] == raw_total


async def _span(client: Any, system_id: str) -> tuple[str, str]:
    body = (await client.get(f"/api/v1/systems/{system_id}")).json()
    return body["first_reading_at"], body["last_reading_at"]


async def test_reading_span_is_exact_when_uploads_interleave(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The interleaving that lost a day: both uploads read the system before either takes
    its lock, then one commits and the other, holding a stale row, writes after it. The span
    must cover both days."""

    early, late = JUNE, JUNE + timedelta(days=3)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        maker = app.state.sessionmaker
        async with maker() as first, maker() as second:
            stale_first = await systems.get(first, system_id)
            stale_second = await systems.get(second, system_id)
            assert stale_first is not None
            assert stale_second is not None
            assert stale_second.last_reading_at is None
            # Ends the read transactions (SQLite would refuse a write from a reader whose
            # snapshot is older than the other's commit); the objects stay as read.
            await first.commit()
            await second.commit()
            batch = batch_from_json({"readings": quarter_series(late, 4, 10.0)})
            await upload_readings(first, stale_first, batch, utcnow())
            await first.commit()
            batch = batch_from_json({"readings": quarter_series(early, 4, 10.0)})
            await upload_readings(second, stale_second, batch, utcnow())
            await second.commit()
            assert stale_second.first_reading_at == early
            assert stale_second.last_reading_at == late + timedelta(minutes=45)
        assert await _span(client, system_id) == (
            iso(early),
            iso(late + timedelta(minutes=45)),
        )


async def test_reading_span_is_exact_under_concurrent_uploads(
    app: FastAPI, enterprise: Tenant
) -> None:
    import asyncio

    days = [JUNE + timedelta(days=d) for d in (4, 0, 6, 2, 5, 1)]
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        responses = await asyncio.gather(
            *(upload(client, system_id, quarter_series(day, 8, 10.0)) for day in days)
        )
        assert [r.status_code for r in responses] == [200] * len(days)
        assert await _span(client, system_id) == (
            iso(JUNE),
            iso(JUNE + timedelta(days=6, minutes=7 * 15)),
        )
