"""`GET /systems/{id}/performance`: the KPIs of section 12 against numbers worked out by hand
from the contract's formulas, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.performance.test_irradiance_upload import irradiance
from tests.support import Tenant, client_for
from tests.systems.factories import create_system, iso, quarter_series, upload

MORNING = datetime(2025, 6, 15, 10, tzinfo=UTC)  # 12:00 in Amsterdam
DAY = {"from": "2025-06-15T00:00:00+02:00", "to": "2025-06-16T00:00:00+02:00"}


def expected_quarter_wh(
    poa: float,
    module_temp: float,
    capacity_kwp: float = 8.4,
    gamma_pct: float = -0.37,
    losses_pct: float = 14.0,
    efficiency: float = 0.96,
) -> tuple[float, float]:
    """(expected AC Wh, temperature-corrected reference Wh) of one quarter-hour, straight
    from the contract's formulas."""
    cell = module_temp + 3.0 * poa / 1000
    dc = capacity_kwp * 1000 * poa / 1000 * (1 + gamma_pct / 100 * (cell - 25))
    return dc * (1 - losses_pct / 100) * efficiency / 4, dc / 4


async def _performance(client: Any, system_id: str, **params: str) -> dict[str, Any]:
    response = await client.get(f"/api/v1/systems/{system_id}/performance", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_sensor_day_matches_the_formulas(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(MORNING, 8, 1500.0))
        await client.post(
            f"/api/v1/systems/{system_id}/irradiance",
            json={"readings": irradiance(MORNING, 8, 800.0, module_temp_c=45.0)},
        )
        body = await _performance(client, system_id, **DAY)
    (bucket,) = body["data"]
    expected_wh, reference_wh = expected_quarter_wh(800.0, 45.0)
    assert bucket["start"] == "2025-06-14T22:00:00Z"
    assert bucket["end"] == "2025-06-15T22:00:00Z"
    assert bucket["energy_wh"] == 12000.0
    assert bucket["expected_energy_wh"] == pytest.approx(8 * expected_wh, abs=0.001)
    assert bucket["insolation_wh_m2"] == 1600.0
    assert bucket["irradiance_source"] == "sensor"
    assert bucket["specific_yield_kwh_kwp"] == round(12 / 8.4, 3)
    assert bucket["reference_yield_h"] == 1.6
    assert bucket["performance_ratio"] == round(12 / 8.4 / 1.6, 3)
    assert bucket["performance_ratio_temperature_corrected"] == round(12000 / (8 * reference_wh), 3)
    assert bucket["energy_performance_index"] == round(12000 / (8 * expected_wh), 3)
    assert (bucket["samples"], bucket["expected_samples"]) == (8, 96)
    assert bucket["coverage"] == round(8 / 96, 3)
    assert "gap" in bucket["quality"]
    assert body["meta"]["totals"]["performance_ratio"] == bucket["performance_ratio"]


async def test_typical_irradiance_gives_an_index_but_no_ratio(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(MORNING, 8, 1500.0))
        # Half the quarter-hours have sensor irradiance on the next day: mixed.
        next_day = MORNING + timedelta(days=1)
        await upload(client, system_id, quarter_series(next_day, 8, 1500.0))
        await client.post(
            f"/api/v1/systems/{system_id}/irradiance",
            json={"readings": irradiance(next_day, 4, 800.0)},
        )
        body = await _performance(
            client, system_id, **{"from": DAY["from"], "to": "2025-06-17T00:00:00+02:00"}
        )
    typical, mixed = body["data"]
    assert typical["irradiance_source"] == "typical"
    assert typical["performance_ratio"] is None
    assert typical["performance_ratio_temperature_corrected"] is None
    assert typical["expected_energy_wh"] > 0
    assert typical["energy_performance_index"] == round(12000 / typical["expected_energy_wh"], 3)
    assert typical["reference_yield_h"] > 0
    assert mixed["irradiance_source"] == "mixed"
    assert mixed["performance_ratio"] is None
    assert body["meta"]["totals"]["irradiance_source"] == "mixed"


async def test_a_bucket_without_readings_is_null_not_zero(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        body = await _performance(client, system_id, **DAY)
    (bucket,) = body["data"]
    for field in (
        "energy_wh",
        "expected_energy_wh",
        "insolation_wh_m2",
        "irradiance_source",
        "performance_ratio",
        "energy_performance_index",
    ):
        assert bucket[field] is None, field
    assert bucket["samples"] == 0
    assert bucket["quality"] == ["gap"]
    assert body["meta"]["totals"]["energy_wh"] is None


async def test_only_the_span_with_readings_is_modelled(app: FastAPI, enterprise: Tenant) -> None:
    """The widest range the rules allow (2,760 monthly buckets, 1970 to 2200) models only
    the quarter-hours that can hold a reading: the site's geometry is computed for the one
    UTC month of the readings, not for 230 years."""
    from solarapi.performance import model

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(MORNING, 8, 1500.0))
        model.clear_cache()
        body = await _performance(
            client, system_id, **{"from": "1970-01-01T00:00:00Z", "to": "2199-12-01T00:00:00Z",
                                  "interval": "1M"}
        )  # fmt: skip
    assert len(body["data"]) == 2760
    (june,) = [bucket for bucket in body["data"] if bucket["samples"]]
    assert june["start"] == "2025-05-31T22:00:00Z"
    assert june["energy_wh"] == 12000.0
    assert june["expected_energy_wh"] is not None
    assert body["meta"]["totals"]["samples"] == 8
    assert len(model._months) == 1  # June 2025 (UTC) only


async def test_meta_model_lists_parameters_defaults_and_overrides(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        defaulted = (await create_system(client))["id"]
        oriented = await create_system(
            client,
            orientation={"tilt_deg": 20.0},
            model={"losses_pct": 10.0},
        )
        patched = await client.patch(
            f"/api/v1/systems/{defaulted}",
            json={"model": {"gamma_pdc_pct_per_c": -0.3, "inverter_efficiency": 0.98}},
        )
        first = (await _performance(client, defaulted, **DAY))["meta"]["model"]
        second = (await _performance(client, oriented["id"], **DAY))["meta"]["model"]
        reset = await client.patch(f"/api/v1/systems/{defaulted}", json={"model": None})
    assert patched.status_code == 200, patched.text
    assert patched.json()["model"] == {
        "gamma_pdc_pct_per_c": -0.3,
        "losses_pct": 14.0,
        "inverter_efficiency": 0.98,
    }
    assert first["orientation_defaults"] == ["tilt_deg", "azimuth_deg"]
    assert (first["tilt_deg"], first["azimuth_deg"]) == (30.0, 180.0)
    assert first["overrides"] == ["gamma_pdc_pct_per_c", "inverter_efficiency"]
    assert first["gamma_pdc_pct_per_c"] == -0.3
    assert first["transposition"] == "haydavies"
    assert first["sapm_delta_t_c"] == 3.0
    assert first["typical_climate"] == "De Bilt, NL (KNMI)"
    assert oriented["model"]["losses_pct"] == 10.0
    assert second["orientation_defaults"] == ["azimuth_deg"]
    assert second["overrides"] == ["losses_pct"]
    assert reset.json()["model"] == {
        "gamma_pdc_pct_per_c": -0.37,
        "losses_pct": 14.0,
        "inverter_efficiency": 0.96,
    }


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({"inverter_efficiency": 96}, "inverter_efficiency"),
        ({"losses_pct": -1}, "losses_pct"),
        ({"gamma_pdc_pct_per_c": 0.5}, "gamma_pdc_pct_per_c"),
        ({"gamma_pdc_pct_per_c": "-0.3"}, "gamma_pdc_pct_per_c"),
        ({"soiling_pct": 2}, "soiling_pct"),
    ],
)
async def test_model_overrides_are_validated(
    app: FastAPI, enterprise: Tenant, model: dict[str, Any], field: str
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await client.patch(f"/api/v1/systems/{system_id}", json={"model": model})
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]


async def test_override_changes_the_expected_energy(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(MORNING, 4, 1500.0))
        await client.post(
            f"/api/v1/systems/{system_id}/irradiance",
            json={"readings": irradiance(MORNING, 4, 600.0, module_temp_c=30.0)},
        )
        before = (await _performance(client, system_id, **DAY))["data"][0]
        await client.patch(f"/api/v1/systems/{system_id}", json={"model": {"losses_pct": 20.0}})
        after = (await _performance(client, system_id, **DAY))["data"][0]
    expected_wh, _ = expected_quarter_wh(600.0, 30.0, losses_pct=20.0)
    assert after["expected_energy_wh"] == pytest.approx(4 * expected_wh, abs=0.001)
    assert after["expected_energy_wh"] < before["expected_energy_wh"]
    # The PR does not depend on the model; the index does.
    assert after["performance_ratio"] == before["performance_ratio"]


async def test_interval_and_plan_rules(app: FastAPI, enterprise: Tenant, pro: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        hourly = await client.get(
            f"/api/v1/systems/{system_id}/performance", params={**DAY, "interval": "1h"}
        )
        monthly = await _performance(
            client,
            system_id,
            **{"from": "2025-01-15T00:00:00Z", "to": "2025-03-02T00:00:00Z", "interval": "1M"},
        )
    async with client_for(app, pro.live) as client:
        other = await client.get(f"/api/v1/systems/{system_id}/performance")
    assert hourly.status_code == 400
    assert "1d, 1w, 1M" in hourly.json()["error"]
    assert [b["start"] for b in monthly["data"]] == [
        "2024-12-31T23:00:00Z",
        "2025-01-31T23:00:00Z",
        "2025-02-28T23:00:00Z",
    ]
    assert monthly["meta"]["interval"] == "1M"
    assert other.status_code == 404


async def test_clipping_stuck_and_outlier_flags(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        # Day 1: at the 7 kW inverter's limit (1,750 Wh a quarter-hour) for an hour.
        await upload(client, system_id, quarter_series(MORNING, 4, 1750.0))
        # Day 2: the same odd value for 5 quarter-hours; day 3: 1,000 Wh at 01:00 local time.
        await upload(client, system_id, quarter_series(MORNING + timedelta(days=1), 5, 1234.5))
        await upload(
            client, system_id, quarter_series(datetime(2025, 6, 16, 23, tzinfo=UTC), 1, 1000.0)
        )
        body = await _performance(
            client, system_id, **{"from": DAY["from"], "to": "2025-06-18T00:00:00+02:00"}
        )
    clipped, stuck, outlier = (bucket["quality"] for bucket in body["data"])
    assert clipped == ["gap", "clipping"]
    assert stuck == ["gap", "stuck"]
    assert outlier == ["gap", "outlier"]


async def test_a_plateau_at_the_days_maximum_is_not_stuck_without_a_rating(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A system without an inverter rating whose inverter limits it anyway: identical values at
    the day's maximum around noon, where the clear sky's curve is too flat to call them
    clipping, are a limit's plateau, not a frozen logger (a year of such a roof in Haarlem,
    DC/AC 2, was flagged `stuck` on 17 days). A logger frozen below the day's peak stays
    `stuck`, and so does one frozen at the day's peak into the evening, which is no clipping
    where even the clear sky's bound is below its value (it was taken for clipping)."""
    noon = datetime(2025, 6, 15, 11, 15, tzinfo=UTC)  # solar noon in Haarlem is ~11:42Z
    ramp = [400.0, 600.0, 800.0, 950.0, 1050.0, 1150.0]
    plateau = [1200.0] * 4
    fall = [1150.0, 1000.0, 900.0, 700.0, 500.0]
    values = ramp + plateau + fall
    readings = [
        {"timestamp": iso(noon + timedelta(minutes=15 * (i - len(ramp)))), "energy_wh": energy}
        for i, energy in enumerate(values)
    ]
    # The next day: a morning up to a peak, then a logger frozen at 700 Wh from 19:00 to 22:00.
    morning = [412.3, 605.1, 811.7, 1012.9, 1187.4, 1312.7]
    frozen = [
        {"timestamp": iso(datetime(2025, 6, 16, 8, tzinfo=UTC) + timedelta(minutes=15 * i)),
         "energy_wh": energy}
        for i, energy in enumerate(morning)
    ]  # fmt: skip
    frozen += quarter_series(datetime(2025, 6, 16, 17, tzinfo=UTC), 12, 700.0)
    # The day after: frozen at noon's value, the day's maximum, from 13:00 into the night.
    frozen_at_noon = quarter_series(datetime(2025, 6, 17, 11, tzinfo=UTC), 36, 1200.0)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, inverter_capacity_kw=None))["id"]
        uploaded = await upload(client, system_id, readings + frozen + frozen_at_noon)
        assert uploaded.status_code == 200, uploaded.text
        body = await _performance(
            client, system_id, **{"from": DAY["from"], "to": "2025-06-18T00:00:00+02:00"}
        )
    limited, frozen_day, frozen_at_noon_day = (bucket["quality"] for bucket in body["data"])
    assert "stuck" not in limited
    assert "stuck" in frozen_day
    # Not clipping where the sun could not have given the value: a frozen logger.
    assert "stuck" in frozen_at_noon_day


async def test_a_coarse_meters_repeats_are_not_stuck(app: FastAPI, enterprise: Tenant) -> None:
    """A meter counting in 10 Wh repeats 70 Wh through a dull hour: that is its resolution, not
    a frozen logger (readings of the sandbox's 2025 rounded to 10 Wh were flagged `stuck` on
    up to 28 days a year). The same four 70.0 Wh between values of a finer meter are `stuck`."""
    dull = [30.0, 50.0, 70.0, 70.0, 70.0, 70.0, 80.0, 110.0, 150.0, 200.0, 260.0, 330.0]
    fine = [31.4, 52.8, 70.0, 70.0, 70.0, 70.0, 83.1, 112.6, 149.9, 203.7, 258.2, 331.5]

    def morning(day: int, values: list[float]) -> list[dict[str, Any]]:
        start = datetime(2025, 6, day, 6, tzinfo=UTC)
        return [
            {"timestamp": iso(start + timedelta(minutes=15 * i)), "energy_wh": energy}
            for i, energy in enumerate(values)
        ]

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        uploaded = await upload(client, system_id, morning(15, dull) + morning(16, fine))
        assert uploaded.status_code == 200, uploaded.text
        body = await _performance(
            client, system_id, **{"from": DAY["from"], "to": "2025-06-17T00:00:00+02:00"}
        )
    coarse, finer = (bucket["quality"] for bucket in body["data"])
    assert "stuck" not in coarse
    assert "stuck" in finer


async def _upload_simulated(
    client: Any,
    system_id: str,
    start: datetime,
    days: int,
    shift_quarters: int,
    azimuth_deg: float = 180.0,
) -> None:
    """Days of the sandbox's physics (a 30° roof in Haarlem facing `azimuth_deg`), stored as
    metered readings, moved `shift_quarters` later (a logger an hour off)."""
    from solarapi.sandbox import model as sandbox

    params = sandbox.PvParams(
        "sys_shift", 52.38, 4.64, "Europe/Amsterdam", 8.4, 7.0, 30.0, azimuth_deg
    )
    series = sandbox.simulate(params, start, start + timedelta(days=days))
    energy = np.roll(series.energy_wh, shift_quarters)
    items = [
        {"timestamp": iso(datetime.fromtimestamp(int(s), UTC)), "energy_wh": round(float(e), 3)}
        for s, e in zip(series.starts, energy, strict=True)
    ]
    response = await upload(client, system_id, items)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(("shift", "flagged"), [(0, False), (4, True), (-4, True), (1, False)])
async def test_time_shift_flag(app: FastAPI, enterprise: Tenant, shift: int, flagged: bool) -> None:
    start = datetime(2025, 6, 1, tzinfo=UTC) - timedelta(hours=2)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await _upload_simulated(client, system_id, start, 14, shift)
        body = await _performance(
            client,
            system_id,
            **{
                "from": "2025-06-02T00:00:00+02:00",
                "to": "2025-06-16T00:00:00+02:00",
                "interval": "1w",
            },
        )
    assert [("time_shift" in bucket["quality"]) for bucket in body["data"]] == [flagged] * 2


@pytest.mark.parametrize("azimuth", [90.0, 270.0])
@pytest.mark.parametrize(("shift", "flagged"), [(0, False), (4, True), (-4, True)])
async def test_time_shift_on_east_and_west_roofs(
    app: FastAPI, enterprise: Tenant, azimuth: float, shift: int, flagged: bool
) -> None:
    """An east or a west roof is not "early" or "late": healthy ones are never flagged, day
    or week, and a logger an hour off either way is, every week. (Against the clear sky
    alone, these healthy April weeks — clouds give the roofs diffuse light all day, which the
    clear sky's beam-shaped curve lacks — were flagged in 3 and 4 weeks of 4, and an east
    roof's readings an hour early or a west roof's an hour late went unseen.)"""
    start = datetime(2025, 4, 7, tzinfo=UTC) - timedelta(hours=2)
    span = {"from": "2025-04-07T00:00:00+02:00", "to": "2025-05-05T00:00:00+02:00"}
    async with client_for(app, enterprise.live) as client:
        orientation = {"tilt_deg": 30.0, "azimuth_deg": azimuth}
        system_id = (await create_system(client, orientation=orientation))["id"]
        await _upload_simulated(client, system_id, start, 28, shift, azimuth)
        weekly = await _performance(client, system_id, **span, interval="1w")
        daily = await _performance(client, system_id, **span, interval="1d")
    assert [("time_shift" in bucket["quality"]) for bucket in weekly["data"]] == [flagged] * 4
    if not flagged:
        assert not [
            bucket["start"] for bucket in daily["data"] if "time_shift" in bucket["quality"]
        ]


async def test_an_answer_is_kept_until_its_own_system_changes(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A performance answer is kept per system: commits of other systems leave it; a readings
    upload, an irradiance upload or a model change of its own system replace it. To see
    whether an answer was kept, the test changes stored readings behind the product's back
    (raw SQL, which raises no data version): a kept answer does not show the change, an
    answer made afresh does."""

    async def behind_the_back(system_id: str, energy_wh: float) -> None:
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                text("UPDATE readings SET energy_wh = :energy WHERE system_id = :id"),
                {"energy": energy_wh, "id": system_id},
            )

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        other = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(MORNING, 8, 1500.0))

        async def energy() -> float:
            return float(
                (await _performance(client, system_id, **DAY))["meta"]["totals"]["energy_wh"]
            )

        assert await energy() == 12000.0
        await behind_the_back(system_id, 100.0)
        assert await energy() == 12000.0  # kept
        # Other systems' commits: a readings upload, irradiance, a model change.
        await upload(client, other, quarter_series(MORNING, 4, 700.0))
        await client.post(
            f"/api/v1/systems/{other}/irradiance", json={"readings": irradiance(MORNING, 4)}
        )
        await client.patch(f"/api/v1/systems/{other}", json={"model": {"losses_pct": 20.0}})
        assert await energy() == 12000.0  # still kept
        # Its own irradiance upload: read afresh.
        uploaded = await client.post(
            f"/api/v1/systems/{system_id}/irradiance", json={"readings": irradiance(MORNING, 2)}
        )
        assert uploaded.status_code == 200, uploaded.text
        assert await energy() == 800.0
        # Its own readings upload (another quarter-hour): read afresh.
        await behind_the_back(system_id, 200.0)
        assert await energy() == 800.0
        await upload(client, system_id, quarter_series(MORNING + timedelta(hours=2), 1, 50.0))
        assert await energy() == 8 * 200.0 + 50.0
        # Its own model change: read afresh.
        await behind_the_back(system_id, 300.0)
        assert await energy() == 1650.0
        patched = await client.patch(
            f"/api/v1/systems/{system_id}", json={"model": {"gamma_pdc_pct_per_c": -0.4}}
        )
        assert patched.status_code == 200, patched.text
        assert await energy() == 9 * 300.0


async def test_a_polar_night_month_has_nothing_expected(app: FastAPI, enterprise: Tenant) -> None:
    """North of the Arctic Circle a whole UTC month can pass without the sun rising (Tromsø,
    69.65° N, December): its typical sky has no daylight instant to take quadrature points at.
    Its buckets expect 0 Wh (EPI null, "nothing expected"), the months around it as usual —
    never a 500 for the system's every range that touches December."""
    tromso = {"latitude": 69.65, "longitude": 18.96, "timezone": "Europe/Oslo", "country": "NO"}
    winter = datetime(2025, 12, 15, 10, tzinfo=UTC)  # noon in Tromsø, the sun below the horizon
    march = datetime(2026, 3, 15, 10, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, location=tromso, market_zone="NO1"))["id"]
        await upload(client, system_id, quarter_series(winter, 8, 0.0))
        await upload(client, system_id, quarter_series(march, 8, 900.0))
        body = await _performance(
            client, system_id, **{"from": "2025-12-01T00:00:00+01:00",
                                  "to": "2026-04-01T00:00:00+02:00", "interval": "1M"}
        )  # fmt: skip
    december, january, february, march_bucket = body["data"]
    assert december["samples"] == 8
    assert december["energy_wh"] == 0.0
    assert december["expected_energy_wh"] == 0.0
    assert december["insolation_wh_m2"] == 0.0
    assert december["energy_performance_index"] is None  # nothing expected: no ratio
    assert january["samples"] == february["samples"] == 0
    assert march_bucket["energy_wh"] == 7200.0
    assert march_bucket["expected_energy_wh"] > 0
    assert body["meta"]["totals"]["expected_energy_wh"] == march_bucket["expected_energy_wh"]
