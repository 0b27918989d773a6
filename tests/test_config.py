"""Every numeric setting's range: a value that would leave the service unable to serve is
refused at start-up, naming the variable (and never quoting the value)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from solarapi.cli_support import settings_problems
from solarapi.config import Settings

# (variable, a value refused). Zero, negative, past any sane bound, not finite.
REFUSED = [
    # 0 was SQLAlchemy's "no limit" (and the pool metric's ceiling said 10).
    ("SOLARAPI_DB_POOL_SIZE", "0"),
    ("SOLARAPI_DB_POOL_SIZE", "-5"),
    ("SOLARAPI_DB_POOL_SIZE", "100000"),
    # 0 failed every request that had to wait for a connection.
    ("SOLARAPI_DB_POOL_TIMEOUT", "0"),
    ("SOLARAPI_DB_POOL_TIMEOUT", "-1"),
    ("SOLARAPI_DB_POOL_TIMEOUT", "nan"),
    ("SOLARAPI_DB_POOL_TIMEOUT", "inf"),
    # 0 answered every request without a key (the API docs included) with a 429.
    ("SOLARAPI_ANONYMOUS_PER_MINUTE", "0"),
    ("SOLARAPI_ANONYMOUS_PER_MINUTE", "-1"),
    ("SOLARAPI_ANONYMOUS_PER_MINUTE", "10000000"),
    ("SOLARAPI_RATE_LIMIT_SCALE", "0"),
    ("SOLARAPI_RATE_LIMIT_SCALE", "10000000"),
    ("SOLARAPI_MAX_BODY_BYTES", "0"),
    ("SOLARAPI_MAX_BODY_BYTES", "1099511627776"),
    # Past 100 years the horizon is before year 1 and every upload failed.
    ("SOLARAPI_READINGS_RETENTION_MONTHS", "0"),
    ("SOLARAPI_READINGS_RETENTION_MONTHS", "30000"),
    ("SOLARAPI_ALERT_SKY_CACHE_DAYS", "-1"),
    ("SOLARAPI_ALERT_SKY_CACHE_DAYS", "1000000000"),
    ("SOLARAPI_KEEP_ALIVE_SECONDS", "0"),
    ("SOLARAPI_KEEP_ALIVE_SECONDS", "10000000000"),
    ("SOLARAPI_WORKER_HEALTHCHECK_SECONDS", "0"),
    ("SOLARAPI_WORKER_HEALTHCHECK_SECONDS", "86400"),
    ("SOLARAPI_MAX_CONNECTIONS", "0"),
    ("SOLARAPI_MAX_CONNECTIONS", "10000000"),
    ("SOLARAPI_MAX_URL_BYTES", "10"),
    ("SOLARAPI_MAX_URL_BYTES", "1073741824"),
    ("SOLARAPI_MAX_HEADER_BYTES", "100"),
    ("SOLARAPI_MAX_HEADER_BYTES", "1073741824"),
    ("SOLARAPI_HEADER_TIMEOUT_SECONDS", "0"),
    ("SOLARAPI_HEADER_TIMEOUT_SECONDS", "inf"),
    ("SOLARAPI_BODY_MIN_RATE", "0"),
    ("SOLARAPI_BODY_MIN_RATE", "10000000000"),
    ("SOLARAPI_BODY_RATE_WINDOW_SECONDS", "0"),
    ("SOLARAPI_BODY_RATE_WINDOW_SECONDS", "nan"),
    ("SOLARAPI_MAX_CONNECTIONS_PER_IP", "0"),
    ("SOLARAPI_MAX_CONNECTIONS_PER_IP", "10000000"),
    ("SOLARAPI_REPORTS_PENDING_PER_ACCOUNT", "0"),
    ("SOLARAPI_REPORTS_KEPT_PER_ACCOUNT", "0"),
    ("SOLARAPI_METRICS_PORT", "0"),
    ("SOLARAPI_METRICS_PORT", "65536"),
]

# The edges that stay allowed: 0 is "keep none" for the sky cache, and the bounds themselves.
ACCEPTED = [
    ("SOLARAPI_ALERT_SKY_CACHE_DAYS", "0", 0),
    ("SOLARAPI_DB_POOL_SIZE", "1", 1),
    ("SOLARAPI_DB_POOL_SIZE", "1000", 1000),
    ("SOLARAPI_DB_POOL_TIMEOUT", "0.2", 0.2),
    ("SOLARAPI_ANONYMOUS_PER_MINUTE", "1", 1),
    ("SOLARAPI_RATE_LIMIT_SCALE", "1000000", 1_000_000),
    ("SOLARAPI_READINGS_RETENTION_MONTHS", "1200", 1200),
    ("SOLARAPI_KEEP_ALIVE_SECONDS", "1", 1),
]

NUMERIC = {
    name
    for name, field in Settings.model_fields.items()
    if field.annotation in (int, float, int | None, float | None)
}


@pytest.fixture(autouse=True)
def _no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(f"SOLARAPI_{name.upper()}", raising=False)


def test_every_numeric_setting_has_a_refused_value() -> None:
    assert NUMERIC
    tested = {variable.removeprefix("SOLARAPI_").lower() for variable, _ in REFUSED}
    assert not NUMERIC - tested, NUMERIC - tested


@pytest.mark.parametrize(("variable", "value"), REFUSED)
def test_a_value_out_of_range_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path)
    problems = settings_problems(refused.value)
    assert problems.startswith(f"{variable}: "), problems
    # What the range is, not what was given (the setting may sit next to a secret).
    assert "input_value" not in problems
    assert problems.removeprefix(f"{variable}: ").startswith("Input should be"), problems


@pytest.mark.parametrize(("variable", "value", "expected"), ACCEPTED)
def test_the_edges_of_a_range_are_accepted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str, expected: float
) -> None:
    monkeypatch.setenv(variable, value)
    settings = Settings(data_dir=tmp_path)
    assert getattr(settings, variable.removeprefix("SOLARAPI_").lower()) == expected
