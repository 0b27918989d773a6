"""`make dist`'s wheel installed as an operator would, into a clean virtual environment with
the locked runtime dependencies only (from uv's cache, no network), then `solarapi migrate`,
`solarapi serve` and requests against it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, served

pytestmark = pytest.mark.slow
UV = ROOT / ".tools" / "bin" / "uv"


def _run(*args: str | Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": "", **(env or {})},
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def _offline_install_block() -> str:
    """The shell block of docs/operations.md's install without a network on the server."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("**Without a network on the server**", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_wheel_installs_offline_migrates_and_serves(tmp_path: Path) -> None:
    if not UV.exists():
        pytest.skip("uv is bootstrapped by `make install`")
    dist = tmp_path / "dist"
    _run(UV, "build", "--wheel", "--out-dir", dist, ".")
    (wheel,) = dist.glob("solarapi-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "solarapi/migrations/script.py.mako" in names
    assert any(n.startswith("solarapi/migrations/versions/0001_") for n in names)
    assert "solarapi/dashboard/templates/base.html" in names
    assert "solarapi/dashboard/static/dashboard.css" in names
    assert not [n for n in names if n.startswith("tests/")]

    # The lock's runtime set (no dev group) from uv's cache, then the wheel itself: the
    # offline install of docs/operations.md as written, in a directory holding only what it
    # says to copy to the server (not the checkout), into a scratch directory for /opt.
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    server = tmp_path / "server"
    server.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(ROOT / name, server / name)
    shutil.copy(wheel, server / wheel.name)
    script = _offline_install_block().replace("/opt/solarapi/venv", str(venv))
    script = script.replace("python3.11", sys.executable)
    script = re.sub(r"^uv ", f"{UV} ", script, flags=re.MULTILINE)
    script = re.sub(r"^(\S+=\S+) uv ", rf"\1 {UV} ", script, flags=re.MULTILINE)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=server, capture_output=True, text=True,
        timeout=600, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": ""},
    )  # fmt: skip
    assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.startswith("solarapi 1."), result.stdout
    installed = _run(UV, "pip", "list", "--python", python).lower()
    for tool in ("pytest", "mypy", "playwright", "moto", "schemathesis", "ruff"):
        assert f"\n{tool} " not in installed, tool

    # The operator's documents and deploy files, where the systemd units point.
    shared = venv / "share" / "doc" / "solarapi"
    for unit in (ROOT / "deploy" / "systemd").glob("*.service"):
        installed = shared / "deploy" / "systemd" / unit.name
        assert installed.read_text() == unit.read_text()
        (documentation,) = re.findall(r"^Documentation=file://(\S+)$", unit.read_text(), re.M)
        assert Path(documentation.replace("/opt/solarapi/venv", str(venv))).is_file()
    assert (shared / "deploy" / "solarapi.env.example").is_file()
    assert (shared / "README.md").is_file()

    solarapi = venv / "bin" / "solarapi"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SOLARAPI_")},
        "SOLARAPI_DATA_DIR": str(tmp_path / "data"),
        "SOLARAPI_WARM_START": "false",
    }
    version = subprocess.run([solarapi, "--version"], env=env, capture_output=True, text=True)
    assert version.stdout.startswith("solarapi 1.")
    subprocess.run([solarapi, "migrate"], env=env, check=True, capture_output=True, cwd=tmp_path)
    # The installed script, with none of this process's SOLARAPI_ settings.
    with served(env, program=[solarapi], inherit_environment=False, cwd=tmp_path) as server:
        health = httpx.get(f"{server.base}/api/v1/health", timeout=5)
        assert health.status_code == 200
        assert health.json()["status"] == "ok"
        login = httpx.get(f"{server.base}/login", timeout=10)
        assert login.status_code == 200  # templates and static files came with the wheel
        assert "/static/dashboard" in login.text
