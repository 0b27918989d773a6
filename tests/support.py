"""Test support, one of each: the databases and services, the in-process app (`running_app`),
the real `solarapi serve` and `solarapi worker` processes (`served`, `started_worker`), the
environment that hands a test's settings to a process (`settings_env`), tenants, clients, and
the process logs the one log-on-failure hook (tests/conftest.py) shows. Factories are plain
functions."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text
from sqlalchemy.engine import make_url
from starlette.responses import Response

from solarapi.accounts.service import create_account
from solarapi.app import create_app
from solarapi.auth.scopes import API_PREFIX
from solarapi.auth.service import create_key
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine
from solarapi.errors import ApiError, Conflict, Forbidden, NotFound, ValidationFailed
from solarapi.kit.pagination import PageDep, page_response
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.logs import JsonFormatter
from solarapi.migrate import upgrade
from solarapi.ratelimit.base import RateLimiter

REQUIRE_SERVICES = os.environ.get("SOLARAPI_TEST_REQUIRE_SERVICES") == "1"
# The databases the suite runs on; `make quick` sets SOLARAPI_TEST_DATABASES=sqlite.
DATABASES = os.environ.get("SOLARAPI_TEST_DATABASES", "sqlite,postgres").split(",")
POSTGRES_ADMIN_URL = os.environ.get(
    "SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("SOLARAPI_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
ROOT = Path(__file__).resolve().parent.parent
TEST_SECRET = "test-secret-key-that-is-long-enough-0123456789"
SERVER_START_SECONDS = 90


# --- process logs, shown by the log-on-failure hook -------------------------------------------

# The last lines of each server or worker log kept; the conftest hook attaches them to the
# report of a test that fails, so a failure shows what the process said.
SERVER_LOG_LINES = 300
# Logs of processes that ended during the current test (its tail, kept by `keep_log`).
server_logs: list[tuple[str, str]] = []
# Processes running now, by label (a server that outlives the test, such as a session fixture's):
# the hook shows the part of their log written during the failing test.
running_logs: dict[str, IO[bytes]] = {}


def _read_from(log: IO[bytes], start: int = 0) -> str:
    """The log from byte `start`, read without moving the file position the process shares."""
    log.flush()
    chunks = []
    while chunk := os.pread(log.fileno(), 1 << 20, start):
        chunks.append(chunk)
        start += len(chunk)
    return b"".join(chunks).decode(errors="replace")


def keep_log(label: str, log: IO[bytes]) -> None:
    """Keep the tail of a process's log for the report, should the test fail."""
    lines = _read_from(log).splitlines()
    server_logs.append((label, "\n".join(lines[-SERVER_LOG_LINES:])))


def log_marks() -> dict[str, int]:
    """Where the log of every running process stands (taken as a test starts)."""
    return {label: os.fstat(log.fileno()).st_size for label, log in running_logs.items()}


def logs_since(marks: dict[str, int]) -> list[tuple[str, str]]:
    """For a failing test: the kept logs of processes that ended during it, and what running
    processes wrote since `marks` (all of it for one started during the test)."""
    found = list(server_logs)
    for label, log in list(running_logs.items()):
        text = _read_from(log, marks.get(label, 0))
        if text or label not in marks:
            lines = text.splitlines()
            found.append((f"{label} during this test", "\n".join(lines[-SERVER_LOG_LINES:])))
    return found


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def postgres_available() -> bool:
    return _port_open("127.0.0.1", 5432)


def redis_available() -> bool:
    return _port_open("127.0.0.1", 6379)


def need_service(name: str, available: bool) -> None:
    """Skip without the service, unless CI requires it (then it is a failure)."""
    if available:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"{name} is required (SOLARAPI_TEST_REQUIRE_SERVICES=1) but not reachable")
    pytest.skip(f"{name} not reachable on this machine")


# --- databases ------------------------------------------------------------------------------


async def admin_connection(database: str | None = None) -> asyncpg.Connection:
    """A connection to the PostgreSQL admin database, or to `database` on the same server."""
    url = make_url(POSTGRES_ADMIN_URL)
    return await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=database or url.database
    )


async def admin(sql: str, database: str | None = None) -> None:
    """Run `sql` on the PostgreSQL admin database (or on `database`)."""
    conn = await admin_connection(database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


# Test databases are named `solarapi_<what>_p<pid>_<random>`: the pid of the test process that
# made it. A run that is killed (SIGKILL, a CI timeout) cannot drop its databases; the next run
# drops those whose process is gone (`drop_stale_databases`, at the start of every session).
_DATABASE_NAME = re.compile(r"^solarapi_[a-z0-9]+_p(\d+)_[0-9a-f]+(?:_moved)?$")


def new_database_name(what: str) -> str:
    """A new name for a PostgreSQL database of this test process (see `_DATABASE_NAME`)."""
    return f"solarapi_{what}_p{os.getpid()}_{uuid.uuid4().hex[:10]}"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


async def drop_stale_databases() -> list[str]:
    """Drop the test databases whose test process no longer runs (a killed run's); returns
    their names. Databases of running test processes (other xdist workers, another run) and
    every database not named by `new_database_name` are left alone."""
    conn = await admin_connection()
    try:
        names = [row[0] for row in await conn.fetch("SELECT datname FROM pg_database")]
        stale = [
            name
            for name in names
            if (match := _DATABASE_NAME.match(name)) and not _process_alive(int(match[1]))
        ]
        for name in stale:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return stale
    finally:
        await conn.close()


def database_url(name: str) -> str:
    """The URL of database `name` on the test PostgreSQL server."""
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (unmigrated) of a test's own, to drop, rename or break
    without touching anyone else's; yields its name. Dropped afterwards under either of the
    names a test may have given it."""
    name = new_database_name("fault")
    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        for candidate in (name, f"{name}_moved"):
            await admin(f'DROP DATABASE IF EXISTS "{candidate}" WITH (FORCE)')


@asynccontextmanager
async def blank_settings(database: str, data_dir: Path) -> AsyncIterator[Settings]:
    """Settings on an empty, unmigrated database of their own — SQLite in `data_dir`, or a
    `scratch_database` — for tests that migrate up and down themselves."""
    if database == "sqlite":
        yield Settings(data_dir=data_dir, secret_key=TEST_SECRET)
        return
    need_service("PostgreSQL", postgres_available())
    async with scratch_database() as name:
        yield Settings(data_dir=data_dir, database_url=database_url(name), secret_key=TEST_SECRET)


async def execute_sql(settings: Settings, sql: str) -> list[tuple[Any, ...]]:
    """One statement on `settings`' database in a transaction of its own, outside any app;
    its rows, if it returns any."""
    engine = create_oneshot_engine(settings)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(sql))
            return [tuple(row) for row in result.fetchall()] if result.returns_rows else []
    finally:
        await engine.dispose()


@contextmanager
def migrated_settings(database: str, data_dir: Path, prefix: str = "test") -> Iterator[Settings]:
    """Settings on a migrated database of their own: SQLite in `data_dir`, or a new PostgreSQL
    database (named after `prefix`, dropped afterwards). Jobs are left to the tests."""
    if database == "sqlite":
        settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET, job_runner="external")
        upgrade(settings)
        yield settings
        return
    need_service("PostgreSQL", postgres_available())
    name = new_database_name(prefix)
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        settings = Settings(
            data_dir=data_dir,
            database_url=database_url(name),
            secret_key=TEST_SECRET,
            job_runner="external",
        )
        upgrade(settings)
        yield settings
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def settings_like(settings: Settings, **changes: Any) -> Settings:
    """A fresh Settings with the same database and secret, and some values changed (validated,
    unlike `model_copy`)."""
    return Settings(**{**settings.model_dump(), **changes})


class TestClock:
    """Injectable wall clock for the rate limiter: real time unless a test pins it."""

    __test__ = False

    def __init__(self) -> None:
        self.pinned: float | None = None

    def __call__(self) -> float:
        return time.time() if self.pinned is None else self.pinned


@dataclass
class Tenant:
    """An account with one key per environment, as tests use them."""

    account_id: str
    email: str
    password: str
    plan: Plan
    keys: dict[Environment, str]
    key_ids: dict[Environment, str] = field(default_factory=dict)

    @property
    def live(self) -> str:
        return self.keys[Environment.LIVE]

    @property
    def test(self) -> str:
        return self.keys[Environment.TEST]


async def make_tenant(app: FastAPI, plan: Plan, password: str = "correct horse battery") -> Tenant:
    email = f"t-{uuid.uuid4().hex[:12]}@example.com"
    secret = app.state.settings.effective_secret_key
    async with app.state.sessionmaker() as session, session.begin():
        created = await create_account(
            session,
            name=f"Test {plan.value}",
            email=email,
            password=password,
            plan=plan,
            now=utcnow(),
        )
        keys: dict[Environment, str] = {}
        key_ids: dict[Environment, str] = {}
        for env in Environment:
            record, new = await create_key(
                session,
                account_id=created.account.id,
                name=f"{env.value} key",
                environment=env,
                secret=secret,
                now=utcnow(),
            )
            keys[env] = new.key
            key_ids[env] = record.id
    return Tenant(created.account.id, email, password, plan, keys, key_ids)


def random_ip() -> str:
    return f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def client_for(app: FastAPI, key: str | None = None, ip: str | None = None) -> httpx.AsyncClient:
    """An HTTP client on the ASGI app, from its own client IP (its own anonymous window)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.ASGITransport(app=app, client=(ip or random_ip(), 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the in-process app ----------------------------------------------------------------------


@asynccontextmanager
async def running_app(
    settings: Settings,
    clock: TestClock | None = None,
    *,
    limiter: RateLimiter | None = None,
    routes: Callable[[FastAPI], None] | None = None,
) -> AsyncIterator[FastAPI]:
    """The one way tests build the product app in this process: on `settings`, with `clock`
    (real time unless pinned) and optionally another `limiter`, `routes` added (test-only
    endpoints), its lifespan running. Jobs are never run by it: tests run them."""
    app = create_app(settings, clock=clock or TestClock(), limiter=limiter, run_jobs=False)
    if routes is not None:
        routes(app)
    async with app.router.lifespan_context(app):
        yield app


PROBE_BOOM = f"{API_PREFIX}/_probe/boom"
PROBE_ECHO = f"{API_PREFIX}/_probe/echo"
PROBE_RAISE = f"{API_PREFIX}/_probe/raise/{{code}}"
PROBE_ITEMS = f"{API_PREFIX}/_probe/items"
PROBE_BODY_LIMIT = 4096
PROBE_ITEM_COUNT = 137


class EchoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    count: int = 0


def add_probe_routes(app: FastAPI) -> None:
    """Test-only routes (never in the product): an unhandled exception, a JSON body, each
    error class, and a paginated list."""

    @app.get(PROBE_BOOM)
    async def boom() -> None:
        raise RuntimeError("secret internal detail: SELECT * FROM api_keys")

    @app.post(PROBE_ECHO)
    async def echo(body: EchoBody) -> dict[str, Any]:
        return body.model_dump()

    @app.get(PROBE_RAISE)
    async def raise_api_error(code: str) -> None:
        errors: dict[str, type[ApiError]] = {
            "validation": ValidationFailed,
            "not_found": NotFound,
            "conflict": Conflict,
            "forbidden": Forbidden,
        }
        raise errors[code](f"probe {code}")

    @app.get(PROBE_ITEMS)
    async def items(request: Request, page: PageDep) -> Response:
        every = [{"id": f"item_{n:03d}"} for n in range(PROBE_ITEM_COUNT)]
        return page_response(
            request, every[page.offset : page.offset + page.limit], len(every), page
        )


class LogCapture(logging.Handler):
    """Every log line the service writes, formatted as in production (the `log_lines` fixture)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


# --- the error shape -------------------------------------------------------------------------

GENERATED_REQUEST_ID = re.compile(r"req_[0-9A-HJKMNP-TV-Z]{26}")


def assert_common_headers(response: httpx.Response) -> None:
    """The headers every API response carries."""
    headers = response.headers
    assert headers["api-version"] == "1.0"
    assert GENERATED_REQUEST_ID.fullmatch(headers["x-request-id"]) or headers["x-request-id"]
    for name in (
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "x-ratelimit-limit-minute",
        "x-ratelimit-remaining-minute",
        "ratelimit-policy",
        "ratelimit",
    ):
        assert name in headers, f"{name} missing on {response.status_code}"
    assert int(headers["x-ratelimit-remaining"]) >= 0
    assert int(headers["x-ratelimit-reset"]) % 60 == 0


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    """`response` is the `{error, code}` shape with `status` and `code`; returns the body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "code"}, body
    assert body["code"] == code
    assert isinstance(body["error"], str)
    assert body["error"]
    assert_common_headers(response)
    return body  # type: ignore[no-any-return]


# --- real processes --------------------------------------------------------------------------


@dataclass
class Server:
    """A running `solarapi serve` process: its base URL and its log (stdout and stderr)."""

    base: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def text(self) -> str:
        return _read_from(self.log)

    def lines(self) -> list[dict[str, Any]]:
        """The JSON lines of the log, parsed (anything else a process printed is left out)."""
        return [orjson.loads(line) for line in self.text().splitlines() if line.startswith("{")]

    def errors(self) -> list[str]:
        """The log's error-level (and worse) lines, and anything not JSON that looks like an
        error (a traceback printed outside the logging setup)."""
        found = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                if orjson.loads(line).get("level") in ("error", "critical"):
                    found.append(line)
            elif "Traceback" in line or "ERROR" in line:
                found.append(line)
        return found


SOLARAPI = (sys.executable, "-m", "solarapi")


def _stop(process: subprocess.Popen[bytes], seconds: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited in `seconds`: never left running."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@contextmanager
def _logged_process(
    label: str, command: Sequence[str | Path], env: dict[str, str], log: Path | None, **popen: Any
) -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
    """A process whose stdout and stderr go to `log` (appended to) or a temporary file, shown by
    the log-on-failure hook while it runs and kept (its tail) once it has ended."""
    # A file, not a pipe: nobody reads the pipe while the process runs, and a server that
    # logs one JSON line per request would block once the pipe's 64 KiB buffer is full.
    out = log.open("a+b") if log else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    try:
        process = subprocess.Popen(
            [str(part) for part in command], env=env, stdout=out, stderr=subprocess.STDOUT, **popen
        )
        label = f"{label} (pid {process.pid})"
        running_logs[label] = out
        try:
            yield process, out
        finally:
            running_logs.pop(label, None)
            keep_log(label, out)
    finally:
        out.close()


@contextmanager
def served(
    env: dict[str, str],
    *args: str,
    log: Path | None = None,
    ready: tuple[str, ...] = (),
    program: Sequence[str | Path] = SOLARAPI,
    inherit_environment: bool = True,
    cwd: Path | None = None,
) -> Iterator[Server]:
    """The one way tests start a real `solarapi serve` process (with `args`, on a free port).

    `env` is added to this process's environment (or is the whole of it, without
    `inherit_environment`); `program` is how `solarapi` is run (an installed wheel's script).
    Readiness is polled, with a deadline, on /api/v1/health and on every URL in `ready`. The
    log is kept in `log` (a file a long-lived fixture can show part of), else in a temporary
    file; the log-on-failure hook shows it when a test fails while or after it runs."""
    port = free_port()
    environment = {
        # Warm start off unless a test asks for it: the sandbox model and the report renderer
        # then load on first use, saving each server ~1.7 s of CPU (the suite starts dozens).
        **({**os.environ, "SOLARAPI_WARM_START": "false"} if inherit_environment else {}),
        **env,
    }
    command = [*program, "serve", "--port", str(port), *args]
    label = f"solarapi serve on port {port}"
    with _logged_process(label, command, environment, log, cwd=cwd) as (process, out):
        server = Server(f"http://127.0.0.1:{port}", process, out)
        try:
            # Generous: the inline job runner imports every handler (matplotlib for reports)
            # at start-up, and the test machine is shared and often loaded.
            deadline = time.monotonic() + SERVER_START_SECONDS
            for url in (f"{server.base}/api/v1/health", *ready):
                while True:
                    if process.poll() is not None:
                        raise RuntimeError(f"solarapi serve exited:\n{server.text()}")
                    try:
                        httpx.get(url, timeout=5)
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline:
                            raise RuntimeError(
                                f"solarapi serve did not answer {url} in {SERVER_START_SECONDS} s"
                            ) from None
                        time.sleep(0.1)
            yield server
        finally:
            _stop(process, 30)


@contextmanager
def started_worker(
    env: dict[str, str], *args: str, log: Path | None = None, stop_seconds: float = 15
) -> Iterator[subprocess.Popen[bytes]]:
    """The one way tests start a real `solarapi worker` (with `args`), `env` added to this
    process's environment, run from the repository root (so `--handlers tests.…` imports).
    Its log goes to `log` (appended to) or a temporary file, shown as a server's is; it is
    stopped (SIGTERM, then SIGKILL after `stop_seconds`) on the way out, never left running
    to claim the next tests' jobs."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    command = [*SOLARAPI, "worker", *args]
    with _logged_process("solarapi worker", command, environment, log, cwd=ROOT) as (process, _):
        try:
            yield process
        finally:
            _stop(process, stop_seconds)


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that gives a `solarapi` process (a command, `serve`, a worker) the
    database, data directory, secret key, job runner and Redis of `settings`, plus the
    variables in `extra`: the one way a test hands its settings to a process."""
    return {
        "SOLARAPI_DATABASE_URL": settings.database_url,
        "SOLARAPI_DATA_DIR": str(settings.data_dir),
        "SOLARAPI_SECRET_KEY": settings.secret_key,
        "SOLARAPI_JOB_RUNNER": settings.job_runner,
        "SOLARAPI_REDIS_URL": settings.redis_url or "",
        **extra,
    }


def run_cli(
    env: dict[str, str], *args: str, check: bool = True, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`solarapi ARGS`, with `env` added to the environment.

    By default in this process, through Typer's test runner: the same command code, parsing
    and exit codes, without the ~1.3 s of interpreter start and imports that a process pays
    per call. It runs in a thread of its own because the commands call `asyncio.run` and many
    callers are async tests with a loop running. An exception that escapes a command is put in
    `stderr` as its traceback, as a process would print it.

    `process=True` runs the real `python -m solarapi`: for commands that set up process-wide
    logging (`serve`, `worker`) and for what only a process shows."""
    if process:
        result = subprocess.run(
            [sys.executable, "-m", "solarapi", *args],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
        )
    else:
        result = _run_cli_here(env, args)
    if check and result.returncode != 0:
        raise AssertionError(f"solarapi {' '.join(args)} failed: {result.stderr}")
    return result


def _run_cli_here(env: dict[str, str], args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    from typer.testing import CliRunner

    from solarapi.cli import app as cli_app

    def invoke() -> subprocess.CompletedProcess[str]:
        outcome = CliRunner().invoke(cli_app, list(args), env=env)
        stderr = outcome.stderr
        if outcome.exception is not None and not isinstance(outcome.exception, SystemExit):
            stderr += "".join(traceback.format_exception(outcome.exception))
        return subprocess.CompletedProcess(
            ["solarapi", *args], outcome.exit_code, outcome.stdout, stderr
        )

    with ThreadPoolExecutor(1, thread_name_prefix="solarapi-cli") as pool:
        return pool.submit(invoke).result(timeout=300)
