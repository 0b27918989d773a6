"""`solarapi weather import FILE --system ID`: CAMS files read with pvlib, checked, stored as
the system's `satellite` irradiance, and used by the performance model."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI

from tests.performance.camsfiles import write_cams
from tests.support import Tenant, client_for, run_cli, settings_env
from tests.systems.factories import create_system, quarter_series, upload

NOON = datetime(2025, 6, 15, 11, tzinfo=UTC)
HAARLEM = (52.38, 4.64)
ROWS = [(600.0, 500.0, 150.0), (650.0, 550.0, 140.0), (620.0, 520.0, 145.0), (0.0, 0.0, 0.0)]


async def test_import_stores_quarter_hours_the_model_uses(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    path = write_cams(
        tmp_path / "cams.csv", latitude=52.381, longitude=4.641, start=NOON, ghi_dni_dhi_w_m2=ROWS
    )
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(NOON, 3, 1200.0))
        result = run_cli(
            settings_env(app.state.settings),
            "weather",
            "import",
            str(path),
            "--system",
            system_id,
            "--json",
        )
        again = run_cli(
            settings_env(app.state.settings),
            "weather",
            "import",
            str(path),
            "--system",
            system_id,
            "--json",
        )
        stored = await client.get(
            f"/api/v1/systems/{system_id}/irradiance",
            params={"from": "2025-06-15T11:00:00Z", "to": "2025-06-15T12:00:00Z"},
        )
        performance = await client.get(
            f"/api/v1/systems/{system_id}/performance",
            params={"from": "2025-06-15T00:00:00+02:00", "to": "2025-06-16T00:00:00+02:00"},
        )
    assert json.loads(result.stdout) == {
        "system_id": system_id,
        "received": 4,
        "inserted": 4,
        "updated": 0,
    }
    assert json.loads(again.stdout)["updated"] == 4
    first = stored.json()["data"][0]
    assert first["source"] == "satellite"
    assert (first["ghi_w_m2"], first["dni_w_m2"], first["dhi_w_m2"]) == (600.0, 500.0, 150.0)
    assert first["poa_w_m2"] is None
    (bucket,) = performance.json()["data"]
    assert bucket["irradiance_source"] == "satellite"
    # Hay–Davies puts a south roof's POA above the horizontal at noon in June? No: the sun is
    # high, so a 30° roof sees about the GHI; what matters is that a PR is given.
    assert bucket["performance_ratio"] is not None
    assert 500 < bucket["insolation_wh_m2"] / 0.75 < 800


async def test_one_minute_files_are_averaged_to_quarter_hours(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    rows = [(float(100 + i), 50.0, 40.0) for i in range(30)]
    path = write_cams(
        tmp_path / "minutes.csv",
        latitude=HAARLEM[0],
        longitude=HAARLEM[1],
        start=NOON,
        ghi_dni_dhi_w_m2=rows,
        step=timedelta(minutes=1),
    )
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        run_cli(
            settings_env(app.state.settings), "weather", "import", str(path), "--system", system_id
        )
        stored = await client.get(
            f"/api/v1/systems/{system_id}/irradiance",
            params={"from": "2025-06-15T11:00:00Z", "to": "2025-06-15T12:00:00Z"},
        )
    assert [item["ghi_w_m2"] for item in stored.json()["data"]] == [107.0, 122.0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"latitude": 52.50}, "km from the system"),
        ({"time_reference": "True solar time (TST)"}, "only 'Universal time (UT)'"),
        (
            {"rows": [*ROWS[:2], ("nan", 500.0, 150.0)]},
            "GHI value of 2025-06-15T11:30:00Z is missing",
        ),
        ({"rows": [*ROWS[:2], (600.0, -999.0, 150.0)]}, "DNI value of 2025-06-15T11:30:00Z"),
        ({"step": timedelta(hours=1)}, "time step is 1h"),
        ({"start": datetime(2099, 1, 1, tzinfo=UTC)}, "not ended"),
    ],
)
async def test_bad_files_are_refused_and_nothing_is_stored(
    app: FastAPI, enterprise: Tenant, tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = write_cams(
        tmp_path / "bad.csv",
        latitude=float(change.get("latitude", HAARLEM[0])),  # type: ignore[arg-type]
        longitude=HAARLEM[1],
        start=change.get("start", NOON),  # type: ignore[arg-type]
        ghi_dni_dhi_w_m2=change.get("rows", ROWS),  # type: ignore[arg-type]
        step=change.get("step", timedelta(minutes=15)),  # type: ignore[arg-type]
        time_reference=str(change.get("time_reference", "Universal time (UT)")),
    )
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        result = run_cli(
            settings_env(app.state.settings),
            "weather",
            "import",
            str(path),
            "--system",
            system_id,
            check=False,
        )
        stored = await client.get(
            f"/api/v1/systems/{system_id}/irradiance",
            params={"from": "2025-06-15T00:00:00Z", "to": "2025-06-16T00:00:00Z"},
        )
    assert result.returncode == 1
    assert message in result.stderr
    assert result.stderr.count("nothing was imported") == 1  # said once, at the end
    assert result.stderr.rstrip().endswith("nothing was imported")
    assert "Traceback" not in result.stderr
    assert stored.json()["data"] == []


async def test_not_a_cams_file_and_unknown_system(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.csv"
    junk.write_text("timestamp,ghi\n2025-06-15T11:00:00Z,600\n", encoding="utf-8")
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        not_cams = run_cli(
            settings_env(app.state.settings),
            "weather",
            "import",
            str(junk),
            "--system",
            system_id,
            check=False,
        )
    unknown = run_cli(
        settings_env(app.state.settings),
        "weather",
        "import",
        str(junk),
        "--system",
        "sys_nope",
        check=False,
    )
    assert not_cams.returncode == 1
    assert "is not a CAMS radiation-service CSV file" in not_cams.stderr
    assert unknown.returncode == 1
    assert "no system with id 'sys_nope'" in unknown.stderr
