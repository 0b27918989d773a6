"""The client installs with pip on its own: httpx (and what httpx needs) and nothing of the
server's; without pandas, everything but DataFrames works and DataFrames say what to install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow

UV = ROOT / ".tools" / "bin" / "uv"
HTTPX_AND_ITS_DEPENDENCIES = {"anyio", "certifi", "h11", "httpcore", "httpx", "idna"}


def test_installs_alone_without_the_servers_dependencies(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [UV, "pip", "install", "--quiet", "--python", python, ROOT / "clients" / "python"],
        check=True,
        timeout=300,
    )
    listed = subprocess.run(
        [UV, "pip", "freeze", "--python", python], check=True, capture_output=True, text=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}
    names.discard("solarapi-client")
    assert names - HTTPX_AND_ITS_DEPENDENCIES <= {"typing-extensions", "exceptiongroup", "sniffio"}

    script = (
        "from solarapi_client import Client, __version__\n"
        "from solarapi_client.models import PriceBucket, PriceMeta, PriceSeries\n"
        "series = PriceSeries(data=[], meta=None)\n"
        "try:\n"
        "    series.to_dataframe()\n"
        "except ImportError as error:\n"
        "    print(__version__, error)\n"
    )
    out = subprocess.run(
        [python, "-c", script], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    assert out.strip() == "1.0.0 DataFrames need pandas: pip install 'solarapi-client[pandas]'"


def test_make_sdk_wheel_builds_a_wheel_that_installs_offline(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run(
        ["make", "--no-print-directory", "sdk-wheel", f"SDK_DIST={out}"],
        check=True,
        timeout=300,
        cwd=ROOT,
    )
    (wheel,) = out.glob("solarapi_client-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", "--offline", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # --offline: from the wheel and uv's cache only, never the network.
    subprocess.run(
        [UV, "pip", "install", "--quiet", "--offline", "--python", python, wheel],
        check=True,
        timeout=300,
    )
    listed = subprocess.run(
        [UV, "pip", "freeze", "--python", python], check=True, capture_output=True, text=True
    ).stdout
    names = {line.split("==")[0].split(" @ ")[0].lower() for line in listed.splitlines()}
    assert "solarapi-client" in names
    names.discard("solarapi-client")
    assert names - HTTPX_AND_ITS_DEPENDENCIES <= {"typing-extensions", "exceptiongroup", "sniffio"}
    # The quickstart's placeholder key gets the SDK's own message, not an httpx error.
    script = (
        "import solarapi_client\n"
        "try:\n"
        "    solarapi_client.Client(api_key='pk_live_…')\n"
        "except solarapi_client.SolarApiError as exc:\n"
        "    print(exc)\n"
    )
    ran = subprocess.run([python, "-c", script], check=True, capture_output=True, text=True)
    assert ran.stdout.startswith("malformed API key")
