"""`POST/GET /systems/{id}/irradiance`: the readings upload's rules, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso

JUNE = datetime(2025, 6, 15, 10, tzinfo=UTC)


def irradiance(
    start: datetime, count: int, poa: float = 800.0, **extra: Any
) -> list[dict[str, Any]]:
    return [
        {"timestamp": iso(start + timedelta(minutes=15 * i)), "poa_w_m2": poa, **extra}
        for i in range(count)
    ]


async def _stored(client: Any, system_id: str) -> list[dict[str, Any]]:
    response = await client.get(
        f"/api/v1/systems/{system_id}/irradiance",
        params={"from": iso(JUNE - timedelta(hours=1)), "to": iso(JUNE + timedelta(hours=5))},
    )
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


async def test_upload_counts_replaces_and_reads_back(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        url = f"/api/v1/systems/{system_id}/irradiance"
        first = await client.post(url, json={"readings": irradiance(JUNE, 4, module_temp_c=40.5)})
        second = await client.post(
            url, json={"readings": irradiance(JUNE + timedelta(minutes=30), 4, 500.0)}
        )
        stored = await _stored(client, system_id)
    assert first.json() == {"received": 4, "inserted": 4, "updated": 0}
    assert second.json() == {"received": 4, "inserted": 2, "updated": 2}
    assert [item["poa_w_m2"] for item in stored] == [800.0, 800.0, 500.0, 500.0, 500.0, 500.0]
    assert stored[0] == {
        "timestamp": "2025-06-15T10:00:00Z",
        "source": "sensor",
        "poa_w_m2": 800.0,
        "module_temp_c": 40.5,
        "ambient_temp_c": None,
        "ghi_w_m2": None,
        "dni_w_m2": None,
        "dhi_w_m2": None,
    }
    # A replaced quarter-hour takes the new row whole: its module temperature is gone.
    assert stored[2]["module_temp_c"] is None


@pytest.mark.parametrize(
    ("item", "field", "words"),
    [
        ({"poa_w_m2": 1500.5}, "poa_w_m2", "between 0 and 1,500"),
        ({"poa_w_m2": -1}, "poa_w_m2", "between 0 and 1,500"),
        ({"module_temp_c": 100.5}, "module_temp_c", "between -50 and 100"),
        ({"ambient_temp_c": -51}, "ambient_temp_c", "between -50 and 100"),
        ({"timestamp": "2025-06-15T10:05:00Z"}, "timestamp", "not the start of a quarter-hour"),
        ({"timestamp": "2025-06-15T10:00:00"}, "timestamp", ""),
        ({"timestamp": "2099-01-01T00:00:00Z"}, "timestamp", "has not ended"),
        ({"poa_w_m2": "800"}, "poa_w_m2", "must be a number"),
        ({"wind_m_s": 3}, "wind_m_s", "unknown field"),
    ],
)
async def test_one_bad_item_is_named_and_nothing_is_stored(
    app: FastAPI, enterprise: Tenant, item: dict[str, Any], field: str, words: str
) -> None:
    batch = irradiance(JUNE, 5)
    batch[3] = {**batch[3], **item}
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await client.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": batch}
        )
        stored = await _stored(client, system_id)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "validation"
    assert response.json()["error"].startswith(f"readings[3].{field}: ")
    assert words in response.json()["error"]
    assert stored == []


async def test_repeated_timestamp_names_the_second(app: FastAPI, enterprise: Tenant) -> None:
    batch = irradiance(JUNE, 3)
    batch.append(dict(batch[1]))
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await client.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": batch}
        )
    assert response.status_code == 400
    assert "readings[3].timestamp: " in response.json()["error"]
    assert "repeats readings[1].timestamp" in response.json()["error"]


async def test_empty_batch_and_other_tenants(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        empty = await client.post(f"/api/v1/systems/{system_id}/irradiance", json={"readings": []})
    async with client_for(app, enterprise.test) as client:
        other = await client.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": irradiance(JUNE, 1)}
        )
    assert empty.status_code == 400
    assert "1 to 10,000" in empty.json()["error"]
    assert other.status_code == 404


async def test_simulated_system_refuses_irradiance(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        system_id = (await create_system(client))["id"]
        response = await client.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": irradiance(JUNE, 1)}
        )
    assert response.status_code == 409
    assert response.json()["code"] == "conflict"


async def test_pro_reads_but_cannot_upload(app: FastAPI, pro: Tenant) -> None:
    async with client_for(app, pro.live) as client:
        post = await client.post(
            "/api/v1/systems/sys_x/irradiance", json={"readings": irradiance(JUNE, 1)}
        )
        get = await client.get("/api/v1/systems/sys_x/irradiance")
    assert post.status_code == 403
    assert get.status_code == 404


async def test_range_is_bounded(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await client.get(
            f"/api/v1/systems/{system_id}/irradiance",
            params={"from": "2025-01-01T00:00:00Z", "to": "2025-03-01T00:00:00Z"},
        )
    assert response.status_code == 400
    assert "31 days" in response.json()["error"]


async def test_a_bad_batch_is_400_before_an_unknown_system_is_404(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The contract's order of checks: no rule of an irradiance batch needs the system, so a
    bad batch is the 400 whatever system it names; a good one to an unknown system, the 404."""
    async with client_for(app, enterprise.live) as client:
        path = "/api/v1/systems/sys_nope/irradiance"
        empty = await client.post(path, json={"readings": []})
        negative = await client.post(path, json={"readings": irradiance(JUNE, 2, poa=-1.0)})
        good = await client.post(path, json={"readings": irradiance(JUNE, 2)})
    assert empty.status_code == 400, empty.text
    assert "1 to 10,000" in empty.json()["error"]
    assert negative.status_code == 400, negative.text
    assert negative.json()["error"].startswith("readings[0].poa_w_m2: must be between 0")
    assert good.status_code == 404, good.text
