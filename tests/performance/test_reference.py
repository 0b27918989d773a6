"""The independent reference of issue 30: a year (2025, both DST days) of a metered system with
sensor irradiance, its KPIs recomputed with pvlib called directly on the inputs the API stores
and returns — not through `solarapi.performance` — and compared with `/performance`.

Targets: |ΔPR| ≤ 0.002, |ΔEPI| ≤ 0.002, daily expected energy within 0.5 %.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pvlib
import pytest
from fastapi import FastAPI

from solarapi.sandbox import model as sandbox
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso

pytestmark = pytest.mark.slow

TZ = "Europe/Amsterdam"
YEAR_START = datetime(2024, 12, 31, 23, tzinfo=UTC)  # 2025-01-01 00:00 local
YEAR_END = datetime(2025, 12, 31, 23, tzinfo=UTC)
CAPACITY_KWP, INVERTER_KW, TILT, AZIMUTH = 8.4, 7.0, 35.0, 180.0


def _inputs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Readings from the sandbox's physics and POA/temperatures for the same year, as upload
    items. Even quarter-hours carry a module temperature, odd ones an ambient one."""
    params = sandbox.PvParams(
        "sys_reference", 52.37, 4.90, TZ, CAPACITY_KWP, INVERTER_KW, TILT, AZIMUTH
    )
    series = sandbox.simulate(params, YEAR_START, YEAR_END)
    conditions = sandbox.simulated_conditions(params, YEAR_START, YEAR_END)
    readings, irradiance = [], []
    for i, start in enumerate(series.starts.tolist()):
        timestamp = iso(datetime.fromtimestamp(start, UTC))
        readings.append({"timestamp": timestamp, "energy_wh": round(float(series.energy_wh[i]), 3)})
        poa = round(float(conditions.poa_w_m2[i]), 2)
        air = round(float(conditions.temp_air_c[i]), 2)
        item: dict[str, Any] = {"timestamp": timestamp, "poa_w_m2": poa}
        if i % 2 == 0:
            item["module_temp_c"] = round(air + 25 * poa / 1000, 2)
        else:
            item["ambient_temp_c"] = air
        irradiance.append(item)
    return readings, irradiance


async def _stored_inputs(client: Any, system_id: str) -> pd.DataFrame:
    """The inputs as the API returns them: readings at 15m and stored irradiance."""
    energy: dict[str, float | None] = {}
    start = YEAR_START
    while start < YEAR_END:
        end = min(start + timedelta(days=100), YEAR_END)
        response = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": iso(start), "to": iso(end), "interval": "15m"},
        )
        for bucket in response.json()["data"]:
            energy[bucket["start"]] = bucket["energy_wh"]
        start = end
    rows: list[dict[str, Any]] = []
    start = YEAR_START
    while start < YEAR_END:
        end = min(start + timedelta(days=31), YEAR_END)
        response = await client.get(
            f"/api/v1/systems/{system_id}/irradiance", params={"from": iso(start), "to": iso(end)}
        )
        rows += response.json()["data"]
        start = end
    frame = pd.DataFrame(rows).set_index("timestamp")
    frame["energy_wh"] = pd.Series(energy)
    frame.index = pd.to_datetime(frame.index, utc=True)
    return frame.astype(
        dict.fromkeys(("poa_w_m2", "module_temp_c", "ambient_temp_c", "energy_wh"), "float64")
    )


def _reference(frame: pd.DataFrame, freq: str) -> pd.DataFrame:
    """IEC 61724-1 figures per local day (`D`) or month (`MS`), pvlib straight."""
    g = frame["poa_w_m2"]
    sapm = pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"]["open_rack_glass_polymer"]
    t_cell = frame["module_temp_c"] + sapm["deltaT"] * g / 1000
    from_air = pvlib.temperature.sapm_cell(g, frame["ambient_temp_c"], 1.0, **sapm)
    t_cell = t_cell.fillna(from_air)
    p_ref = pvlib.pvsystem.pvwatts_dc(g, t_cell, CAPACITY_KWP * 1000, -0.37 / 100)
    p_ac = np.minimum(p_ref * (1 - 0.14) * 0.96, INVERTER_KW * 1000)
    counted = frame["energy_wh"].notna()
    table = pd.DataFrame(
        {
            "energy": frame["energy_wh"].where(counted),
            "expected": (p_ac / 4).where(counted),
            "insolation": (g / 4).where(counted),
            "reference": (p_ref / 4).where(counted),
        }
    )
    table.index = table.index.tz_convert(TZ)
    sums = table.resample(freq).sum()
    return pd.DataFrame(
        {
            "expected": sums["expected"],
            "pr": (sums["energy"] / 1000 / CAPACITY_KWP) / (sums["insolation"] / 1000),
            "pr_tc": sums["energy"] / sums["reference"],
            "epi": sums["energy"] / sums["expected"],
        }
    )


async def test_a_year_agrees_with_pvlib_called_directly(app: FastAPI, enterprise: Tenant) -> None:
    readings, irradiance = _inputs()
    async with client_for(app, enterprise.live) as client:
        system = await create_system(
            client,
            capacity_kwp=CAPACITY_KWP,
            inverter_capacity_kw=INVERTER_KW,
            location={"latitude": 52.37, "longitude": 4.90, "timezone": TZ},
            orientation={"tilt_deg": TILT, "azimuth_deg": AZIMUTH},
        )
        system_id = system["id"]
        for lo in range(0, len(readings), 10_000):
            for path, items in (("readings", readings), ("irradiance", irradiance)):
                response = await client.post(
                    f"/api/v1/systems/{system_id}/{path}",
                    json={"readings": items[lo : lo + 10_000]},
                )
                assert response.status_code == 200, response.text
        year = {"from": iso(YEAR_START), "to": iso(YEAR_END)}
        daily = (await client.get(f"/api/v1/systems/{system_id}/performance", params=year)).json()
        monthly = (
            await client.get(
                f"/api/v1/systems/{system_id}/performance", params={**year, "interval": "1M"}
            )
        ).json()
        frame = await _stored_inputs(client, system_id)

    days = _reference(frame, "D")
    months = _reference(frame, "MS")
    assert len(daily["data"]) == len(days) == 365
    assert len(monthly["data"]) == len(months) == 12
    # The DST days are 23 and 25 hours long, and compared like any other.
    lengths = {b["start"][:10]: b["expected_samples"] for b in daily["data"]}
    assert lengths["2025-03-29"] == 92
    assert lengths["2025-10-25"] == 100
    worst = {"pr": 0.0, "epi": 0.0, "expected": 0.0}
    for figures, reference in ((daily, days), (monthly, months)):
        for bucket, (_, row) in zip(figures["data"], reference.iterrows(), strict=True):
            assert bucket["irradiance_source"] == "sensor"
            worst["pr"] = max(worst["pr"], abs(bucket["performance_ratio"] - row["pr"]))
            worst["pr"] = max(
                worst["pr"],
                abs(bucket["performance_ratio_temperature_corrected"] - row["pr_tc"]),
            )
            worst["epi"] = max(worst["epi"], abs(bucket["energy_performance_index"] - row["epi"]))
            if figures is daily:
                relative = abs(bucket["expected_energy_wh"] / row["expected"] - 1)
                worst["expected"] = max(worst["expected"], relative)
    print(f"reference: worst |ΔPR| {worst['pr']:.5f}, |ΔEPI| {worst['epi']:.5f}, "
          f"daily expected {worst['expected'] * 100:.4f} %")  # fmt: skip
    assert worst["pr"] <= 0.002
    assert worst["epi"] <= 0.002
    assert worst["expected"] <= 0.005
    totals = monthly["meta"]["totals"]
    assert totals["samples"] == totals["expected_samples"] == 35040
