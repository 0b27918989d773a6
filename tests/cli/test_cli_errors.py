"""What the operator sees when a command cannot run: one line saying why and what to do, a
non-zero exit, never a traceback, never a secret — and no data directory made by a command
that only reads."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from solarapi.config import Settings
from solarapi.dbfaults import SCHEMA_REVISION
from solarapi.migrate import downgrade, upgrade
from tests.support import TEST_SECRET, run_cli

PASSWORD = "hunter2-sekrit"
UNREACHABLE = f"postgresql://solar:{PASSWORD}@127.0.0.1:9/solar"


def _embedded(data_dir: Path) -> dict[str, str]:
    return {
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_DATABASE_URL": "",
        "SOLARAPI_SECRET_KEY": "",
        "SOLARAPI_REDIS_URL": "",
    }


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("accounts", "list"),
        ("keys", "list", "--account", "ops@example.com"),
        ("keys", "create", "--account", "ops@example.com"),
        ("audit", "list"),
        ("declarations", "pending"),
        ("demo", "--no-data"),
    ],
)
def test_a_missing_database_names_migrate_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    data_dir = tmp_path / "typo"
    result = run_cli(_embedded(data_dir), *args, check=False)
    assert result.returncode == 1
    assert _one_line(result.stderr) == (
        f"error: no database at {data_dir}/solar.db: run `solarapi migrate` to create it (or "
        "set SOLARAPI_DATA_DIR / SOLARAPI_DATABASE_URL to the one you meant)"
    )
    assert not data_dir.exists()


def test_read_only_commands_outside_the_project_create_no_data_dir(tmp_path: Path) -> None:
    """A real process in an empty working directory, with no setting at all."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLARAPI_")}
    for args, code in ((["openapi"], 0), (["migrate", "--check"], 1), (["accounts", "list"], 1)):
        result = subprocess.run(
            [sys.executable, "-m", "solarapi", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == code, result.stderr
        assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unmigrated_or_older_schema_names_migrate(tmp_path: Path) -> None:
    env = _embedded(tmp_path)
    (tmp_path / "solar.db").touch()
    empty = run_cli(env, "accounts", "list", check=False)
    assert empty.returncode == 1
    assert _one_line(empty.stderr) == (
        f"error: the database at sqlite:///{tmp_path}/solar.db has no schema yet: run "
        "`solarapi migrate`"
    )
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
    upgrade(settings)
    downgrade(settings, "0008_draft_without_readings")
    older = run_cli(env, "accounts", "list", check=False)
    assert older.returncode == 1
    assert _one_line(older.stderr) == (
        f"error: the database at sqlite:///{tmp_path}/solar.db is at schema revision "
        f"0008_draft_without_readings, this release needs {SCHEMA_REVISION}: run "
        "`solarapi migrate`"
    )


def test_migrate_refuses_a_schema_from_a_newer_release(tmp_path: Path) -> None:
    import sqlite3

    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
    upgrade(settings)
    with sqlite3.connect(tmp_path / "solar.db") as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    result = run_cli(_embedded(tmp_path), "migrate", check=False)
    assert result.returncode == 1
    assert "at schema revision 9999_from_the_future, which this release" in _one_line(result.stderr)
    assert "a newer release migrated it" in result.stderr


@pytest.mark.parametrize(
    "args",
    [("accounts", "list"), ("migrate",), ("migrate", "--check"), ("readings", "import", "sys_x")],
)
def test_an_unreachable_database_server_is_one_line_without_its_password(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    if args[0] == "readings":
        csv = tmp_path / "r.csv"
        csv.write_text("timestamp,energy_wh\n")
        args = (*args, str(csv))
    env = {
        "SOLARAPI_DATA_DIR": str(tmp_path),
        "SOLARAPI_DATABASE_URL": UNREACHABLE,
        "SOLARAPI_SECRET_KEY": TEST_SECRET,
        "SOLARAPI_REDIS_URL": "",
    }
    # A real process: `readings import` opens its own engine, so what it prints comes from
    # the command line's last net (`cli.main`), which only a process runs.
    result = run_cli(env, *args, check=False, process=True)
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert line.startswith(
        "error: cannot reach the database at postgresql://solar:***@127.0.0.1:9/solar: "
    ), line
    assert PASSWORD not in result.stderr + result.stdout


def test_a_database_server_that_never_answers_is_one_line_not_a_minute(tmp_path: Path) -> None:
    """A host that takes the connection and then says nothing (a firewall's black hole, a
    hung server): the command gives up after its connect timeout (10 s), not asyncpg's 60 s."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever answers
    port = silent.getsockname()[1]
    env = {
        **os.environ,
        "SOLARAPI_DATA_DIR": str(tmp_path),
        "SOLARAPI_DATABASE_URL": f"postgresql://solar:{PASSWORD}@127.0.0.1:{port}/solar",
        "SOLARAPI_SECRET_KEY": TEST_SECRET,
        "SOLARAPI_REDIS_URL": "",
    }
    try:
        # Well under asyncpg's own 60 s, well over the 10 s timeout plus a busy start-up.
        result = subprocess.run(
            [sys.executable, "-m", "solarapi", "accounts", "list"],
            env=env,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )
    finally:
        silent.close()
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert line.startswith(
        f"error: cannot reach the database at postgresql://solar:***@127.0.0.1:{port}/solar"
    ), line
    assert PASSWORD not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "SOLARAPI_SECRET_KEY",
            "short-secret-Xy9",
            "error: invalid settings: SOLARAPI_SECRET_KEY must be at least 32 characters long",
        ),
        (
            "SOLARAPI_DATABASE_URL",
            f"mysql://solar:{PASSWORD}@db/solar",
            "error: invalid settings: SOLARAPI_DATABASE_URL: the backend 'mysql' is not "
            "supported; the service runs on sqlite:///… or postgresql://…",
        ),
        (
            "SOLARAPI_DATABASE_URL",
            f"solar:{PASSWORD}@db",
            "error: invalid settings: SOLARAPI_DATABASE_URL: not a database URL; use "
            "sqlite:///path/to/file.db or postgresql://user@host:5432/database",
        ),
        (
            "SOLARAPI_REDIS_URL",
            f"redis//:{PASSWORD}@cache:6379",
            "error: invalid settings: SOLARAPI_REDIS_URL: not a Redis URL: it starts with "
            "redis://, rediss:// or unix:// (unset it for in-memory rate limits)",
        ),
        (
            "SOLARAPI_METRICS_PORT",
            "nine-thousand",
            "error: invalid settings: SOLARAPI_METRICS_PORT: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        # Accepted once, then `serve` and `worker` died with "unexpected ValueError: Unknown
        # level" naming no variable; and a body limit of 0 refused every body with a 413.
        (
            "SOLARAPI_LOG_LEVEL",
            "LOUD",
            "error: invalid settings: SOLARAPI_LOG_LEVEL: must be one of DEBUG, INFO, "
            "WARNING, ERROR, CRITICAL",
        ),
        (
            "SOLARAPI_MAX_BODY_BYTES",
            "0",
            "error: invalid settings: SOLARAPI_MAX_BODY_BYTES: Input should be greater than "
            "or equal to 1",
        ),
        # Accepted once: a pool of 0 is SQLAlchemy's "no limit", and an anonymous window of 0
        # answered every request without a key with a 429 (tests/test_config.py: every range).
        (
            "SOLARAPI_DB_POOL_SIZE",
            "0",
            "error: invalid settings: SOLARAPI_DB_POOL_SIZE: Input should be greater than "
            "or equal to 1",
        ),
        (
            "SOLARAPI_ANONYMOUS_PER_MINUTE",
            "0",
            "error: invalid settings: SOLARAPI_ANONYMOUS_PER_MINUTE: Input should be greater "
            "than or equal to 1",
        ),
    ],
)
def test_a_bad_setting_is_named_without_echoing_its_value(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    env = {**_embedded(tmp_path), variable: value}
    result = run_cli(env, "accounts", "list", check=False)
    assert result.returncode == 2
    assert _one_line(result.stderr) == message
    assert value not in result.stderr
    assert PASSWORD not in result.stderr


def test_the_secret_can_come_from_a_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(TEST_SECRET + "\n")
    settings = Settings(_env_file=None, secret_key_file=secret_file)  # type: ignore[call-arg]
    assert settings.effective_secret_key == TEST_SECRET.encode()
    env = {**_embedded(tmp_path), "SOLARAPI_SECRET_KEY_FILE": str(tmp_path / "missing")}
    missing = run_cli(env, "accounts", "list", check=False)
    assert missing.returncode == 2
    assert _one_line(missing.stderr) == (
        f"error: invalid settings: SOLARAPI_SECRET_KEY_FILE: cannot read {tmp_path}/missing: "
        "No such file or directory"
    )
    both = run_cli(
        {**env, "SOLARAPI_SECRET_KEY_FILE": str(secret_file), "SOLARAPI_SECRET_KEY": TEST_SECRET},
        "accounts", "list", check=False,
    )  # fmt: skip
    assert "not both" in both.stderr


def test_version() -> None:
    from solarapi.kit.version import package_version

    result = run_cli({}, "--version")
    assert result.stdout.strip() == f"solarapi {package_version()} (API 1.0)"


@pytest.mark.services
@pytest.mark.parametrize(
    "variant",
    [
        lambda url: url.replace("postgresql://", "postgres://", 1),
        lambda url: f"{url}?sslmode=disable",
        lambda url: f"{url}?sslmode=prefer",
        lambda url: url.replace("postgresql://", "postgres://", 1) + "?sslmode=disable",
    ],
    ids=["postgres-scheme", "sslmode-disable", "sslmode-prefer", "both"],
)
def test_a_postgresql_url_as_hosting_providers_write_it_works(
    postgres_settings: Settings, variant: Callable[[str], str]
) -> None:
    """`postgres://` (Heroku's and many providers' spelling) and libpq's `sslmode` (what a
    managed PostgreSQL's connection string carries) reach the database: the scheme is the
    same backend, and asyncpg takes `sslmode`'s values as its `ssl`."""
    env = {
        "SOLARAPI_DATABASE_URL": variant(postgres_settings.database_url),
        "SOLARAPI_SECRET_KEY": TEST_SECRET,
    }
    result = run_cli(env, "migrate", "--check", check=False)
    assert result.returncode == 0, result.stderr
    assert "is up to date" in result.stdout + result.stderr, result
