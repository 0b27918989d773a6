"""The app a `solarapi serve` worker builds has the sandbox model imported and run once, so
the first sandbox request does not wait seconds for pvlib (it did: 2.75 s) — unless
`SOLARAPI_WARM_START=false` asks it to load on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from solarapi.config import Settings
from tests.support import TEST_SECRET, settings_env


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, secret_key=TEST_SECRET, job_runner="external")


_PROBE = """
import sys
from solarapi.app import serve_app
assert "pvlib" not in sys.modules
serve_app()
print("pvlib" in sys.modules, end=" ")
from solarapi.sandbox import model
print(len(model._months))
"""


@pytest.mark.parametrize("warm", ["true", "false"])
def test_serve_app_warms_the_sandbox_model_unless_told_not_to(tmp_path: Path, warm: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=settings_env(_settings(tmp_path), SOLARAPI_WARM_START=warm, PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported, cached_months = result.stdout.split()
    assert imported == ("True" if warm == "true" else "False")
    assert (int(cached_months) > 0) == (warm == "true")


_FREEZE_PROBE = """
import gc
from solarapi.app import serve_app
before = gc.get_freeze_count()
serve_app()
print(before, gc.get_freeze_count())
"""


def test_serve_app_freezes_what_start_up_left_alive(tmp_path: Path) -> None:
    """A worker's start-up objects are frozen, so full collections do not walk them while
    requests wait (the p99 of uncached reads was the collector)."""
    result = subprocess.run(
        [sys.executable, "-c", _FREEZE_PROBE],
        env=settings_env(_settings(tmp_path), SOLARAPI_WARM_START="false", PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    before, after = (int(n) for n in result.stdout.split())
    assert before == 0
    assert after > 10_000
