"""The quickstarts work when pasted: the client README's Python blocks, run in order against
the real server with a real key, and the project README's first curl example."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from solarapi_client import Client
from tests.client.conftest import Served, server_env
from tests.support import ROOT, Tenant, run_cli

BASE_URL = "http://127.0.0.1:8000"


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def _run_python(code: str, served: Served, key: str) -> str:
    """The code as pasted, run with the reader's environment: the key in `SOLARAPI_API_KEY`
    (the one name the READMEs use) and this test server in `SOLARAPI_BASE_URL`."""
    env = {**os.environ, "SOLARAPI_API_KEY": key, "SOLARAPI_BASE_URL": served.base_url}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stderr}\n--- the code ---\n{code}"
    return result.stdout


def test_no_key_in_code_meant_to_be_pasted() -> None:
    """Code blocks never hold a live key's placeholder (pasted, `pk_live_…` is not a key)
    and name the key's variable one way only."""
    for readme in (ROOT / "README.md", ROOT / "clients" / "python" / "README.md"):
        for block in _blocks(readme.read_text(), "python") + _blocks(readme.read_text(), "sh"):
            assert "pk_live_…" not in block, (readme, block)
            assert 'api_key="pk_' not in block, (readme, block)
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = doc.read_text()
        for other in ("SOLAR_API_KEY", "$SOLAR_KEY", '"Bearer $KEY"'):
            assert other not in text, (doc, other)


def test_the_client_readme_runs_as_pasted(
    served: Served, enterprise: Tenant, client: Client
) -> None:
    # The reader has a system with readings of the last day (the quickstart reads them).
    system = client.systems.create(
        name="Existing roof",
        capacity_kwp=4.0,
        location={"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
    )
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    client.readings.upload(system.id, [{"timestamp": hour, "energy_wh": 321.5}])
    quickstart, as_async, writes, _fleet, _tokens, _logger, errors, webhooks = _blocks(
        (ROOT / "clients" / "python" / "README.md").read_text(), "python"
    )
    # The blocks after the quickstart continue its session: run them before its close().
    opening, closing = quickstart.rsplit("client.close()", 1)
    out = _run_python(opening + writes + errors + webhooks + "client.close()" + closing,
                      served, enterprise.live)  # fmt: skip
    assert "enterprise live" in out
    assert f"{system.id} Existing roof 4.0 Europe/Amsterdam" in out
    assert "total 321.5 Wh" in out
    assert "not_found 404" in out
    out = _run_python(as_async, served, enterprise.live)
    assert "Rooftop Haarlem" in out


def test_the_client_quickstart_tolerates_an_account_without_systems(
    served: Served, pro: Tenant
) -> None:
    quickstart = _blocks((ROOT / "clients" / "python" / "README.md").read_text(), "python")[0]
    out = _run_python(quickstart, served, pro.live)  # a new account: no live systems
    assert "pro live" in out
    assert "no systems yet" in out


def test_the_quickstarts_lead_with_the_sandbox_key(served: Served, pro: Tenant) -> None:
    """With the sandbox key they lead with, both quickstarts print the sandbox's three
    simulated systems and their numbers; with a live key of a new account, a sentence."""
    client_readme = (ROOT / "clients" / "python" / "README.md").read_text()
    assert "export SOLARAPI_API_KEY=pk_test_" in _blocks(client_readme, "sh")[1]
    out = _run_python(_blocks(client_readme, "python")[0], served, pro.test)
    assert "pro test" in out
    assert len(re.findall(r"^sys_\S+ .*\(sandbox\) ", out, re.MULTILINE)) == 3
    total = re.search(r"^total (\S+) Wh$", out, re.MULTILINE)
    assert total is not None
    assert float(total.group(1)) > 0  # the simulated day has production
    [first] = _blocks((ROOT / "README.md").read_text(), "python")
    out = _run_python(first, served, pro.test)
    assert len(re.findall(r"\(sandbox\) (\d+(\.\d+)?|None) Wh today$", out, re.MULTILINE)) == 3, out
    out = _run_python(first, served, pro.live)
    assert out.startswith("no systems yet")


def test_the_change_feed_example_keeps_an_exact_copy(
    served: Served, enterprise: Tenant, client: Client, tmp_path: Path
) -> None:
    """The README's local copy: run twice around more uploads (new and replaced readings)
    and a deleted system, the SQLite file then holds exactly what the API stores (the
    deleted system's readings stayed in the copy for good: the feed says nothing of them)."""
    systems = [
        client.systems.create(
            name=f"Copied roof {i}",
            capacity_kwp=4.0,
            location={"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
        )
        for i in range(3)
    ]
    day = datetime(2025, 6, 3, tzinfo=UTC)

    def upload(system_id: str, first: int, count: int, energy: float) -> None:
        items = [
            {"timestamp": day + timedelta(minutes=15 * (first + i)), "energy_wh": energy + i}
            for i in range(count)
        ]
        client.readings.upload(system_id, items)

    upload(systems[0].id, 0, 40, 10.0)
    upload(systems[2].id, 0, 8, 1.0)
    [_, _, _, fleet_block, _, _, _, _] = _blocks(
        (ROOT / "clients" / "python" / "README.md").read_text(), "python"
    )
    script = fleet_block.replace('"fleet.sqlite3"', repr(str(tmp_path / "fleet.sqlite3")))
    out = _run_python(script, served, enterprise.live)
    assert "copy holds 48 readings" in out
    upload(systems[1].id, 10, 30, 5.0)
    upload(systems[0].id, 20, 30, 99.0)  # 20 replaced, 10 new
    client.systems.delete(systems[2].id)
    out = _run_python(script, served, enterprise.live)
    assert "copy holds 80 readings" in out
    with sqlite3.connect(tmp_path / "fleet.sqlite3") as db:
        copy = {
            (system_id, datetime.fromisoformat(stamp), energy)
            for system_id, stamp, energy in db.execute(
                "SELECT system_id, timestamp, energy_wh FROM readings"
            )
        }
    stored = set()
    for system in systems[:2]:
        series = client.readings.get(
            system.id, start=day, end=day + timedelta(days=1), interval="15m"
        )
        stored |= {
            (system.id, bucket.start, bucket.energy_wh)
            for bucket in series.data
            if bucket.energy_wh is not None
        }
    assert copy == stored


def test_the_alerts_and_logger_examples_run_as_pasted(
    served: Served, enterprise: Tenant, client: Client
) -> None:
    """The reader's system has stopped reporting: the first block lists its open alert and
    creates a token, the logger block (run with that token) uploads the last hour."""
    system = client.systems.create(
        name="Logger roof",
        capacity_kwp=4.0,
        location={"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"},
    )
    client.readings.upload(system.id, [{"timestamp": "2025-05-01T12:00:00Z", "energy_wh": 300}])
    deadline = time.monotonic() + 60  # the upload's evaluation opens system.offline (a job)
    while not list(client.alerts.list(system_id=system.id)):
        assert time.monotonic() < deadline, "no alert within 60 s"
        time.sleep(0.5)
    [_, _, _, _, tokens, logger, _, _] = _blocks(
        (ROOT / "clients" / "python" / "README.md").read_text(), "python"
    )
    out = _run_python(tokens, served, enterprise.live)
    assert f"{system.id} system.offline" in out
    (token,) = re.findall(r"^token (ik_\w+)$", out, re.MULTILINE)
    assert re.search(rf"^roof logger {token[:7]}…{token[-4:]} None$", out, re.MULTILINE)

    out = _run_python(logger.replace('"ik_…"', repr(token)), served, enterprise.live)
    assert "stored 4 new and 0 replaced" in out
    assert client.systems.summary(system.id).energy_lifetime_wh == 300 + 4 * 250
    (listed,) = client.ingest_tokens.list(system.id)
    assert listed.last_used_at is not None


def test_the_readmes_first_curl_uses_the_pro_sandbox_key(served: Served) -> None:
    readme = (ROOT / "README.md").read_text()
    first = next(block for block in _blocks(readme, "sh") if "curl" in block)
    env = server_env(served.settings)
    # What `make run` did before the reader pastes (on PostgreSQL the demo asks to be sure).
    run_cli(env, "demo", "--no-data", "--yes-this-is-not-production")
    script = first.replace(BASE_URL, served.base_url).replace(".venv/bin/", f"{sys.prefix}/bin/")
    # The README's `make run` is SQLite; this test also serves PostgreSQL, where `demo` asks.
    script = script.replace("demo --json", "demo --yes-this-is-not-production --json")
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**__import__("os").environ, **env},
    )
    assert result.returncode == 0, result.stderr
    assert "SOLARAPI_API_KEY=" in script
    # The Pro account's sandbox: its three simulated systems, whatever the live side holds.
    systems = json.loads(result.stdout)["data"]
    assert len(systems) == 3
    assert all(system["data_source"] == "simulated" for system in systems), systems
