"""The files under deploy/ name only what an install from the wheel has: the systemd units'
paths and documentation, and the environment template's variables."""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath

import pytest

from tests.support import ROOT

# Where docs/operations.md installs the service (`python3.11 -m venv /opt/solarapi/venv`).
VENV = PurePosixPath("/opt/solarapi/venv")
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def unit_values(unit: Path, key: str) -> list[str]:
    prefix = f"{key}="
    return [
        line.removeprefix(prefix).strip()
        for line in unit.read_text().splitlines()
        if line.startswith(prefix)
    ]


def wheel_shared_data() -> dict[str, str]:
    """pyproject's map of checkout paths to paths under the virtual environment."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data: dict[str, str] = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    return data


def installed_source(path: PurePosixPath) -> Path | None:
    """The checkout file that the wheel installs at `path` under the venv (None: none)."""
    relative = path.relative_to(VENV).as_posix()
    for source, target in wheel_shared_data().items():
        if relative == target or relative.startswith(target + "/"):
            candidate = ROOT / source / relative.removeprefix(target).lstrip("/")
            if candidate.is_file():
                return candidate
    return None


def test_the_units_exist() -> None:
    assert [unit.name for unit in UNITS] == ["solarapi-worker.service", "solarapi.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_a_units_documentation_is_installed_by_the_wheel(unit: Path) -> None:
    # It named /opt/solarapi/docs/operations.md, which no install step puts there.
    (documentation,) = unit_values(unit, "Documentation")
    assert documentation.startswith("file://"), documentation
    path = PurePosixPath(documentation.removeprefix("file://"))
    assert path.is_relative_to(VENV), path
    source = installed_source(path)
    assert source == ROOT / "docs" / "operations.md"


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_a_units_commands_are_the_venvs(unit: Path) -> None:
    commands = unit_values(unit, "ExecStart") + unit_values(unit, "ExecStartPre")
    assert commands
    for command in commands:
        assert command.split()[0] == str(VENV / "bin" / "solarapi"), command


def test_the_deploy_files_come_with_the_wheel() -> None:
    # The install steps copy the units and the env template on a server that got the wheel.
    assert wheel_shared_data()["deploy"] == "share/doc/solarapi/deploy"
    assert wheel_shared_data()["docs"] == "share/doc/solarapi/docs"
