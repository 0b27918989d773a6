"""What `solarapi serve` and `solarapi worker` say when they start (one JSON line with the
effective configuration, a warning for an unreachable Redis) and a multi-worker start on a
busy host: children still loading are not killed by the supervisor."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from solarapi.config import Settings
from tests.support import (
    REDIS_URL,
    SERVER_START_SECONDS,
    TEST_SECRET,
    free_port,
    need_service,
    redis_available,
    run_cli,
    served,
    settings_env,
)

pytestmark = pytest.mark.slow


def _env(settings: Settings, data_dir: Path, **extra: str) -> dict[str, str]:
    """The process's environment: the database of `settings`, a data directory of its own."""
    return settings_env(settings.model_copy(update={"data_dir": data_dir}), **extra)


def test_serve_states_its_configuration_and_warns_of_an_unreachable_redis(
    settings: Settings, tmp_path: Path
) -> None:
    closed = free_port()  # nothing listens there
    env = _env(settings, tmp_path, SOLARAPI_REDIS_URL=f"redis://:redis-pass@127.0.0.1:{closed}/3")
    with served(env) as server:
        health = httpx.get(f"{server.base}/api/v1/health", timeout=10).json()
        lines = server.lines()
        text = server.text()
    assert health["status"] == "degraded"  # it serves anyway: the limiter fails open
    first = lines[0]
    assert (first["logger"], first["msg"]) == ("solarapi.startup", "starting")
    config = first["config"]
    assert config["role"] == "api"
    assert config["version"] == health["version"]
    assert config["tzdata"] == health["tzdata"]  # the IANA release ("2026f"), as /health says
    assert config["database"]["kind"] == ("sqlite" if settings.is_sqlite else "postgresql")
    if settings.is_postgres:
        assert config["database"]["host"] == "127.0.0.1"
    assert config["redis"] == {"host": "127.0.0.1", "port": closed, "db": "3"}
    assert config["job_runner"] == "external"
    assert config["secret"] == "set"
    assert config["workers"] == 1
    warning = next(line for line in lines if line["msg"].startswith("redis unreachable"))
    assert warning["level"] == "warning"
    assert f"redis://:***@127.0.0.1:{closed}/3" in warning["msg"]
    assert "fall back to per-process counters" in warning["msg"]
    assert TEST_SECRET not in text
    assert "redis-pass" not in text


def test_worker_states_its_configuration(settings: Settings, tmp_path: Path) -> None:
    result = run_cli(_env(settings, tmp_path), "worker", "--once", process=True)
    first = next(line for line in result.stderr.splitlines() if line.startswith("{"))
    assert '"msg":"starting"' in first
    assert '"role":"worker"' in first
    assert TEST_SECRET not in result.stderr


@pytest.mark.services
def test_two_workers_warming_on_a_busy_host_are_not_killed(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    """The sandbox warm-up on (seconds of CPU per child, more on this shared machine), two
    children: both finish starting, and the supervisor never declares one dead."""
    need_service("Redis", redis_available())
    env = _env(sqlite_settings, tmp_path, SOLARAPI_REDIS_URL=REDIS_URL, SOLARAPI_WARM_START="true")
    with served(env, "--workers", "2") as server:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            started = [
                line for line in server.lines() if line["msg"] == "Application startup complete."
            ]
            if len(started) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        lines, text = server.lines(), server.text()
    assert len({line["pid"] for line in started}) == 2, text
    assert not [line for line in lines if "died" in line["msg"]], text
