"""The app a `solarapi serve` worker builds has the sandbox model imported and run once, so
the first sandbox request does not wait seconds for pvlib (it did: 2.75 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_SECRET

_PROBE = """
import sys
from solarapi.app import serve_app
assert "pvlib" not in sys.modules
serve_app()
from solarapi.sandbox import model
print("pvlib" in sys.modules, len(model._months))
"""


def test_serve_app_warms_the_sandbox_model(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={
            "SOLARAPI_DATA_DIR": str(tmp_path),
            "SOLARAPI_SECRET_KEY": TEST_SECRET,
            "SOLARAPI_JOB_RUNNER": "external",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported, cached_months = result.stdout.split()
    assert imported == "True"
    assert int(cached_months) >= 1
