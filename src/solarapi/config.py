"""Settings, read once from `SOLARAPI_*` environment variables, validated at start-up."""

from __future__ import annotations

import ipaddress
import secrets
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import URL, make_url

from solarapi.kit.plans import Plan

# The async driver of each backend a plain URL may name ("postgres" is Heroku's spelling).
_ASYNC_DRIVERS = {
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "sqlite": "sqlite+aiosqlite",
}
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_PLACEHOLDER_SECRETS = {"", "change-me", "changeme", "secret", "dev", "test"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SOLARAPI_", extra="ignore")

    data_dir: Path = Path("./data")
    # Plain SQLAlchemy URL; the async driver is chosen by `async_database_url`.
    database_url: str = ""
    redis_url: str | None = None
    # Empty = embedded default: generated once and kept in the data dir.
    secret_key: str = ""
    # The secret read from a file instead (Docker and Kubernetes secrets, systemd credentials).
    secret_key_file: Path | None = None
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Every numeric setting has a range (the `Field` bounds): a value outside it is refused
    # at start-up naming the variable, instead of a service that starts and cannot serve
    # (a pool of 0 is SQLAlchemy's "no limit", an anonymous window of 0 refuses every
    # request without a key with a 429, a timeout of 0 fails every wait). The upper bounds
    # are far past any sane value; they stop a typo (an extra digit or three) that would
    # overflow a timer or a date, or hold a body of gigabytes in memory. Floats must be
    # finite ("inf" and "nan" parse as floats).
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=1024**3)
    anonymous_per_minute: int = Field(default=60, ge=1, le=1_000_000)
    # Multiplies every plan's per-minute and per-day limit. For load tests and benchmarks
    # only, so 429s do not distort the figures; production leaves it at 1.
    rate_limit_scale: int = Field(default=1, ge=1, le=1_000_000)
    signup_plan: Plan = Plan.STARTER
    webhooks_allow_loopback: bool = False
    reports_dir: Path | None = None
    # Unset: report files on local disk (`reports_dir`). `s3://bucket/prefix`: on S3 or an
    # S3-compatible server (credentials and region from the usual AWS_* variables).
    reports_url: str | None = None
    # For S3-compatible servers (MinIO, Ceph, moto): their URL; path-style addressing is used.
    reports_s3_endpoint_url: str | None = None
    # Unset: no metrics. Set: `solarapi serve` serves Prometheus metrics on this port of
    # `metrics_host` (an operator port, not the API's).
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "127.0.0.1"
    entsoe_token: str | None = None
    log_level: str = "INFO"
    # "inline" runs jobs in the API process (embedded default); "external" leaves them to
    # `solarapi worker` processes.
    job_runner: Literal["inline", "external"] = "inline"
    # `solarapi serve` imports and runs the sandbox model once, and starts the report
    # renderer's process, before it answers (~1.7 s of CPU), so the first sandbox request and
    # the first report do not wait seconds for them. Off: both load on first use.
    warm_start: bool = True
    # Unset: keep every raw quarter-hour. N: the daily job drops whole months of raw readings
    # older than N months (PostgreSQL partitions; rollups are kept). docs/scaling.md.
    # At most 100 years: the horizon is a date (a larger value made every upload fail).
    readings_retention_months: int | None = Field(default=None, ge=1, le=1200)
    # Site-days of the sun and the clear sky each job-running process keeps for the alert
    # rules (alerts.sky.SkyCache, ~2.5 KB each: the default, ~41 MiB, holds the 38-day
    # windows of ~420 systems). 0 keeps none: every evaluation computes its whole window.
    alert_sky_cache_days: int = Field(default=16_384, ge=0, le=4_194_304)
    # Connections kept per process (plus 10 overflow). Below the number of requests in
    # flight, overflow connections are opened and closed all the time, and each new
    # PostgreSQL session is a process fork on the server.
    db_pool_size: int = Field(default=20, ge=1, le=1000)
    # How long a request waits for a pooled connection before its 503 (overload, not a fault).
    db_pool_timeout: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    # `solarapi serve` (server.py). Idle keep-alive connections stay open longer than client
    # pools and load balancers keep theirs (60 s is the common ceiling), so the server never
    # closes one just as the client reuses it; their number is capped per process.
    keep_alive_seconds: int = Field(default=75, ge=1, le=86_400)
    # `serve --workers N`: how long the supervisor waits for a child's answer to its health
    # ping before it kills the child as hung. uvicorn's 5 s killed children still starting
    # on a busy host (a spawned interpreter imports before it can answer).
    worker_healthcheck_seconds: int = Field(default=60, ge=1, le=3600)
    max_connections: int = Field(default=800, ge=1, le=1_000_000)
    # The request line's URL and all header lines together. The URL's default holds the
    # portfolio's largest `system_ids` (1,000 ids of 30 characters, commas sent as `%2C`:
    # ~33 kB), so it is over nginx's 8 KiB lines (docs/operations.md).
    max_url_bytes: int = Field(default=40 * 1024, ge=256, le=1024**2)
    max_header_bytes: int = Field(default=32 * 1024, ge=1024, le=16 * 1024**2)
    # Slow clients (server.py): a request head must be complete this long after its first
    # byte; a body must arrive at `body_min_rate` bytes/s or more over each window in which
    # the server waits for it (Kestrel's defaults: 30 s, 240 B/s over 5 s); one client
    # address may hold this many connections per process (trusted proxies are exempt).
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)
    body_min_rate: int = Field(default=240, ge=1, le=1024**3)
    body_rate_window_seconds: float = Field(default=5.0, gt=0, le=3600, allow_inf_nan=False)
    max_connections_per_ip: int = Field(default=64, ge=1, le=1_000_000)
    # Reports one account may have queued or running (429 beyond), and keep with a file
    # (409 beyond: delete some or let them expire).
    reports_pending_per_account: int = Field(default=10, ge=1, le=1_000_000)
    reports_kept_per_account: int = Field(default=200, ge=1, le=1_000_000)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _valid_networks(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item, strict=False)
        return value

    @field_validator("metrics_port", "reports_s3_endpoint_url", "secret_key_file", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("reports_url")
    @classmethod
    def _reports_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not value.startswith("s3://") or not value[len("s3://") :].split("/", 1)[0]:
            raise ValueError(
                "SOLARAPI_REPORTS_URL must be s3://bucket or s3://bucket/prefix "
                "(unset it to keep report files on local disk)"
            )
        return value

    @field_validator("database_url", "redis_url")
    @classmethod
    def _empty_is_none_for_redis(cls, value: str | None) -> str | None:
        return value.strip() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        if not value:
            return value
        # The message never quotes the URL: it may hold a password.
        try:
            backend = make_url(value).get_backend_name()
        except Exception:
            raise ValueError(
                "not a database URL; use sqlite:///path/to/file.db or "
                "postgresql://user@host:5432/database"
            ) from None
        if backend not in ("sqlite", "postgresql", "postgres"):
            raise ValueError(
                f"the backend '{backend}' is not supported; the service runs on sqlite:///… or "
                "postgresql://…"
            )
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        # Checked here, not first by `logging` when `serve` or `worker` starts.
        level = value.strip().upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(_LOG_LEVELS)}")
        return level

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "not a Redis URL: it starts with redis://, rediss:// or unix:// (unset it for in-memory "
                "rate limits)"
            )
        return value

    @model_validator(mode="after")
    def _defaults_and_production_rules(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{(self.data_dir / 'solar.db').as_posix()}"
        if self.redis_url == "":
            self.redis_url = None
        if self.secret_key_file is not None:
            if self.secret_key:
                raise ValueError("set SOLARAPI_SECRET_KEY or SOLARAPI_SECRET_KEY_FILE, not both")
            try:
                self.secret_key = self.secret_key_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise ValueError(
                    f"SOLARAPI_SECRET_KEY_FILE: cannot read {self.secret_key_file}: {reason}"
                ) from None
        if self.is_postgres and self.secret_key.strip().lower() in _PLACEHOLDER_SECRETS:
            raise ValueError(
                "SOLARAPI_SECRET_KEY must be set to a long random value when running on "
                "PostgreSQL (every worker must share it); generate one with "
                "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
            )
        if self.secret_key and len(self.secret_key) < 32:
            raise ValueError("SOLARAPI_SECRET_KEY must be at least 32 characters long")
        return self

    @cached_property
    def trusted_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [ipaddress.ip_network(item, strict=False) for item in self.trusted_proxies]

    @property
    def is_postgres(self) -> bool:
        return self.async_database_url.get_backend_name() == "postgresql"

    @property
    def is_sqlite(self) -> bool:
        return self.async_database_url.get_backend_name() == "sqlite"

    @property
    def async_database_url(self) -> URL:
        """The database URL with its backend's async driver (asyncpg, aiosqlite) when it
        names none; a URL that names its driver is used as it is."""
        url = make_url(self.database_url)
        driver = _ASYNC_DRIVERS.get(url.drivername)
        if driver is None:
            return url
        url = url.set(drivername=driver)
        if driver == "postgresql+asyncpg" and "sslmode" in url.query:
            # libpq's name, in every managed PostgreSQL's connection string; asyncpg takes the
            # same values (disable … verify-full) as `ssl` and refuses `sslmode`.
            mode = url.query["sslmode"]
            url = url.difference_update_query(["sslmode"]).update_query_dict({"ssl": mode})
        return url

    @cached_property
    def effective_secret_key(self) -> bytes:
        """The server secret: explicit, or generated once into the data dir (embedded mode)."""
        if self.secret_key:
            return self.secret_key.encode()
        path = self.data_dir / "secret_key"
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            # O_EXCL: two processes starting at once must not write two different secrets.
            try:
                with path.open("x", encoding="ascii") as fh:
                    fh.write(secrets.token_urlsafe(48))
                path.chmod(0o600)
            except FileExistsError:
                pass
        return path.read_text(encoding="ascii").strip().encode()

    @property
    def effective_reports_dir(self) -> Path:
        return self.reports_dir or (self.data_dir / "reports")
