"""`solarapi readings import` as an operator runs it: a real subprocess on each database."""

from __future__ import annotations

import io
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI

from solarapi.readings.csvfile import CsvRowError, read_batches
from tests.support import Tenant, client_for, run_cli, settings_env
from tests.systems.factories import create_system, iso


def _csv(path: Path, rows: list[str], header: str = "timestamp,energy_wh,power_w") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


async def _day(client: object, system_id: str, start: datetime, days: int) -> dict[str, object]:
    response = await client.get(  # type: ignore[attr-defined]
        f"/api/v1/systems/{system_id}/readings",
        params={"from": iso(start), "to": iso(start + timedelta(days=days)), "interval": "1M"},
    )
    totals: dict[str, object] = response.json()["meta"]["totals"]
    return totals


async def test_import_streams_batches_and_summarises(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [
        f"{iso(start + timedelta(minutes=15 * i))},{i % 5}.5,{'' if i % 2 else 100}"
        for i in range(25_000)
    ]
    path = _csv(tmp_path / "year.csv", rows)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client, capacity_kwp=50))["id"]
        result = run_cli(
            settings_env(app.state.settings), "readings", "import", system_id, str(path), "--json"
        )
        again = run_cli(
            settings_env(app.state.settings), "readings", "import", system_id, str(path), "--json"
        )
        plain = run_cli(
            settings_env(app.state.settings), "readings", "import", system_id, str(path)
        )
        totals = await _day(client, system_id, start, 300)
    summary = json.loads(result.stdout)
    assert summary["received"] == 25_000
    assert summary["inserted"] == 25_000
    assert summary["batches"] == 3
    assert summary["error"] is None
    assert json.loads(again.stdout)["updated"] == 25_000
    # Piped, stdout is the summary line alone (no progress bar, no empty line before it).
    (line,) = plain.stdout.splitlines()
    assert line.startswith(
        f"25,000 readings imported into {system_id} in 3 batch(es): 0 inserted, 25,000 updated ("
    )
    assert totals["samples"] == 25_000
    assert totals["energy_wh"] == sum(i % 5 + 0.5 for i in range(25_000))
    assert totals["power_max_w"] == 100.0


async def test_bad_row_names_its_line_and_keeps_earlier_batches(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [f"{iso(start + timedelta(minutes=15 * i))},1" for i in range(12_000)]
    rows[10_500] = f"{iso(start + timedelta(minutes=15 * 10_500))},-3"
    path = _csv(tmp_path / "bad.csv", rows, header="timestamp,energy_wh")
    text_row = _csv(tmp_path / "text.csv", [f"{iso(start)},lots"], header="timestamp,energy_wh")
    bad_header = _csv(tmp_path / "header.csv", [f"{iso(start)},1"], header="time,wh")
    env = settings_env(app.state.settings)

    def import_file(system: str, file: str) -> subprocess.CompletedProcess[str]:
        return run_cli(env, "readings", "import", system, file, check=False)

    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        failed = import_file(system_id, str(path))
        text = import_file(system_id, str(text_row))
        header = import_file(system_id, str(bad_header))
        unknown = import_file("sys_nope", str(text_row))
        totals = await _day(client, system_id, start, 200)
    assert failed.returncode == 1
    # Line 1 is the header, so item 10,500 is on line 10,502.
    assert "line 10502: energy_wh: must be ≥ 0" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert totals["samples"] == 10_000  # the first batch only
    assert text.returncode == 1
    assert "line 2: energy_wh: 'lots' is not a number" in text.stderr
    assert "line 1: the header must be" in header.stderr
    assert "no system with id 'sys_nope'" in unknown.stderr


async def test_a_byte_order_mark_is_fine_and_other_encodings_are_named(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    """The format says "UTF-8, a byte-order mark is fine" and the dashboard takes such a file;
    the import refused it ("line 1: the header must be …": the mark was read as part of the
    header), and a Latin-1 file ended in "unexpected UnicodeDecodeError"."""
    start = datetime(2024, 3, 1, tzinfo=UTC)
    marked = tmp_path / "bom.csv"
    marked.write_bytes(
        b"\xef\xbb\xbftimestamp,energy_wh\r\n"
        + b"".join(f"{iso(start + timedelta(minutes=15 * i))},{i}\r\n".encode() for i in range(4))
    )
    latin = tmp_path / "latin.csv"
    latin.write_bytes(f"timestamp,energy_wh\n{iso(start)},1\n# Zähler 1\n".encode("latin-1"))
    env = settings_env(app.state.settings)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        imported = run_cli(env, "readings", "import", system_id, str(marked), "--json")
        refused = run_cli(env, "readings", "import", system_id, str(latin), check=False)
        totals = await _day(client, system_id, start, 1)
    assert json.loads(imported.stdout)["inserted"] == 4
    assert totals["energy_wh"] == 0 + 1 + 2 + 3
    assert refused.returncode == 1
    assert "the file is not UTF-8 text; save it as CSV in UTF-8" in refused.stderr
    assert "UnicodeDecodeError" not in refused.stderr


async def test_a_repeated_quarter_hour_names_both_lines(
    app: FastAPI, enterprise: Tenant, tmp_path: Path
) -> None:
    """The API's message names the batch's items (`repeats readings[2].timestamp`), which a
    file has not: the import names the two lines."""
    start = datetime(2024, 3, 1, tzinfo=UTC)
    stamps = [iso(start + timedelta(minutes=15 * i)) for i in range(5)]
    path = _csv(
        tmp_path / "twice.csv", [f"{s},1" for s in [*stamps, stamps[2]]], "timestamp,energy_wh"
    )
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        refused = run_cli(
            settings_env(app.state.settings), "readings", "import", system_id, str(path),
            check=False,
        )  # fmt: skip
    assert refused.returncode == 1
    assert (
        f"line 7: timestamp: {stamps[2]} repeats line 4; each quarter-hour may appear once per "
        "file" in refused.stderr
    )


@pytest.mark.parametrize("cell", ["1_000", "nan", "inf", "-inf", "0x10", "1e"])
def test_a_number_is_written_as_json_writes_one(cell: str) -> None:
    """The file's numbers are a JSON body's: `1_000`, `nan` or `inf`, which Python's `float`
    would read, are refused naming the line (they were taken as 1000.0, NaN and ∞)."""
    stream = io.StringIO(f"timestamp,energy_wh\n2025-06-15T10:00:00Z,{cell}\n")
    with pytest.raises(CsvRowError, match=rf"line 2: energy_wh: '{re.escape(cell)}' is not a"):
        list(read_batches(stream))


def test_the_numbers_json_allows_are_read() -> None:
    rows = "".join(
        f"2025-06-15T{10 + i:02}:00:00Z,{cell}\n"
        for i, cell in enumerate(["1480.5", "1e3", " 12 ", ".5", "5.", "0"])
    )
    [(lines, batch)] = list(read_batches(io.StringIO("timestamp,energy_wh\n" + rows)))
    assert lines == [2, 3, 4, 5, 6, 7]
    assert list(batch.energy_wh) == [1480.5, 1000.0, 12.0, 0.5, 5.0, 0.0]
