"""Simulated systems report the sandbox model's own irradiance as `sensor`: their PR is what
the simulation's losses imply."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from fastapi import FastAPI

from solarapi.sandbox import model as sandbox
from tests.support import Tenant, client_for
from tests.systems.factories import create_system

START = datetime(2025, 5, 1, tzinfo=UTC)
END = datetime(2025, 6, 1, tzinfo=UTC)


async def test_simulated_pr_is_the_simulations_own(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        system = await create_system(client, inverter_capacity_kw=None, installed_on="2024-01-01")
        response = await client.get(
            f"/api/v1/systems/{system['id']}/performance",
            params={
                "from": "2025-05-01T00:00:00+02:00",
                "to": "2025-06-01T00:00:00+02:00",
                "interval": "1M",
            },
        )
    assert response.status_code == 200, response.text
    totals = response.json()["meta"]["totals"]
    params = sandbox.PvParams(
        system_id=system["id"],
        latitude=52.38,
        longitude=4.64,
        timezone="Europe/Amsterdam",
        capacity_kwp=8.4,
        inverter_capacity_kw=None,
        tilt_deg=30.0,
        azimuth_deg=180.0,
    )
    # The widened range: May in Amsterdam.
    lo, hi = datetime(2025, 4, 30, 22, tzinfo=UTC), datetime(2025, 5, 31, 22, tzinfo=UTC)
    series = sandbox.simulate(params, lo, hi)
    conditions = sandbox.simulated_conditions(params, lo, hi)
    energy = float(series.energy_wh.sum())
    insolation = float(conditions.poa_w_m2.sum()) / 4
    assert totals["irradiance_source"] == "sensor"
    assert totals["energy_wh"] == round(energy, 3)
    assert totals["insolation_wh_m2"] == round(insolation, 3)
    assert totals["performance_ratio"] == round(energy / 1000 / 8.4 / (insolation / 1000), 3)
    # What the simulation's losses imply for the temperature-corrected ratio: its system
    # losses × the nominal inverter efficiency, less what the sandbox models and the
    # expectation does not — the beam's incidence-angle loss, the inverter's part-load curve
    # and a roof mount's hotter cells (the expectation assumes open rack) — under 10 %
    # together (5–6 % seen, depending on the system id's weather).
    implied = (1 - sandbox.SYSTEM_LOSSES_PCT / 100) * sandbox.INVERTER_EFFICIENCY
    corrected = totals["performance_ratio_temperature_corrected"]
    assert implied * 0.90 <= corrected <= implied
    assert not np.isnan(totals["energy_performance_index"])
    assert 0.9 <= totals["energy_performance_index"] <= 1.05
    # No gap, stuck, outlier or time shift in a simulated month. `clipping` is not asserted:
    # without an inverter rating it is a heuristic (a plateau within 0.5 % of the day's peak
    # while the clear sky still changes), and some ids' simulated clouds make one although the
    # sandbox does not clip here (a known false positive, see docs/performance.md).
    assert set(response.json()["data"][0]["quality"]) <= {"clipping"}


async def test_a_simulated_systems_irradiance_is_the_models_own(
    app: FastAPI, enterprise: Tenant
) -> None:
    """`GET /systems/{id}/irradiance` of a simulated system gives the `sensor` quarter-hours
    its performance uses (the model's POA and air temperature; it stored none), so the
    insolation can be recomputed from what the API returns."""
    day = {"from": "2025-05-01T00:00:00+02:00", "to": "2025-05-02T00:00:00+02:00"}
    async with client_for(app, enterprise.test) as client:
        system = await create_system(client, inverter_capacity_kw=None, installed_on="2024-01-01")
        path = f"/api/v1/systems/{system['id']}"
        stored = await client.get(f"{path}/irradiance", params=day)
        performance = await client.get(f"{path}/performance", params={**day, "interval": "1d"})
    assert stored.status_code == 200, stored.text
    rows = stored.json()["data"]
    assert len(rows) == 96
    assert {row["source"] for row in rows} == {"sensor"}
    assert all(row["poa_w_m2"] >= 0 and row["ambient_temp_c"] is not None for row in rows)
    assert max(row["poa_w_m2"] for row in rows) > 500  # a May noon under the model's sky
    assert rows[0]["module_temp_c"] is None
    assert rows[0]["ghi_w_m2"] is None
    (bucket,) = performance.json()["data"]
    assert bucket["irradiance_source"] == "sensor"
    insolation = sum(row["poa_w_m2"] for row in rows) / 4
    assert abs(bucket["insolation_wh_m2"] - insolation) < 0.05  # the rows' own rounding
