"""The files under deploy/ name only what an install from the wheel has: the systemd units'
paths and documentation, and the environment template's variables."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from solarapi.config import Settings
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


def env_template() -> dict[str, str]:
    """deploy/solarapi.env.example's assignments, commented-out ones included."""
    values: dict[str, str] = {}
    for line in (ROOT / "deploy" / "solarapi.env.example").read_text().splitlines():
        assignment = line.removeprefix("#")
        name, equals, value = assignment.partition("=")
        if equals and name.isupper() and " " not in name:
            values[name] = value
    return values


def test_the_env_template_names_only_real_settings_and_they_validate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    template = env_template()
    ours = {name: value for name, value in template.items() if name.startswith("SOLARAPI_")}
    assert "SOLARAPI_DATABASE_URL" in ours
    fields = {f"SOLARAPI_{name.upper()}" for name in Settings.model_fields}
    assert set(ours) <= fields, set(ours) - fields
    for name in fields:
        monkeypatch.delenv(name, raising=False)
    for name, value in ours.items():
        monkeypatch.setenv(name, value)
    secret = tmp_path / "secret_key"
    secret.write_text("s" * 48)
    monkeypatch.setenv("SOLARAPI_SECRET_KEY_FILE", str(secret))  # what the units add
    settings = Settings()
    assert settings.is_postgres
    assert settings.job_runner == "external"


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_a_units_syscall_filter_lets_the_service_lower_its_priority(
    unit: Path, tmp_path: Path
) -> None:
    # `~@resources` denied setpriority, which the report renderer's process and the password
    # threads call to run niced, and a denied call kills the process (SIGSYS) unless
    # SystemCallErrorNumber= is set. systemd's own reading of the unit decides.
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    text = unit.read_text()
    assert unit_values(unit, "SystemCallErrorNumber") == ["EPERM"]
    # Offline analysis reads the unit as it is; its commands must exist.
    program = tmp_path / "solarapi"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    copy = tmp_path / unit.name
    copy.write_text(text.replace(str(VENV / "bin" / "solarapi"), str(program)))
    result = subprocess.run(
        [analyze, "security", "--offline=true", "--no-pager", str(copy)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    report = result.stdout + result.stderr
    assert "setpriority is allowed" in report, report
    exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", report)
    assert exposure is not None, report
    assert float(exposure.group(1)) <= 2.0, report


def test_the_compose_steps_give_the_password_file_to_the_images_user() -> None:
    # asyncpg skips a password file with group or world access, and Compose mounts secret
    # files with their host owner and mode: the image's user must own it, 0600.
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    uid = re.search(r"useradd [^\n]*--uid (\d+)", dockerfile)
    assert uid is not None, "the image's user has a fixed uid"
    compose = (ROOT / "deploy" / "compose.yaml").read_text()
    assert f"chown {uid.group(1)}:{uid.group(1)} deploy/secrets/pgpass" in compose
    assert "chmod 0600 deploy/secrets/pgpass" in compose
    assert "PGPASSFILE: /run/secrets/pgpass" in compose
