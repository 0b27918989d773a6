"""Test support: service discovery, tenants and clients. Factories are plain functions."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from solarapi.accounts.service import create_account
from solarapi.auth.service import create_key
from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow

REQUIRE_SERVICES = os.environ.get("SOLARAPI_TEST_REQUIRE_SERVICES") == "1"
# The databases the suite runs on; `make quick` sets SOLARAPI_TEST_DATABASES=sqlite.
DATABASES = os.environ.get("SOLARAPI_TEST_DATABASES", "sqlite,postgres").split(",")
POSTGRES_ADMIN_URL = os.environ.get(
    "SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("SOLARAPI_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
ROOT = Path(__file__).resolve().parent.parent
SERVER_START_SECONDS = 90
# The last lines of each server or worker log a test kept; the conftest hook attaches them to
# the report of a test that fails, so a failure shows what the server said.
SERVER_LOG_LINES = 300
server_logs: list[tuple[str, str]] = []


def keep_log(label: str, log: IO[bytes]) -> None:
    """Keep the tail of a process's log for the report, should the test fail."""
    log.flush()
    log.seek(0)
    lines = log.read().decode(errors="replace").splitlines()
    server_logs.append((label, "\n".join(lines[-SERVER_LOG_LINES:])))


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


@dataclass
class Server:
    """A running `solarapi serve` process: its base URL and its log (stdout and stderr)."""

    base: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def text(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

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


@contextmanager
def served(
    env: dict[str, str], *args: str, log: Path | None = None, ready: tuple[str, ...] = ()
) -> Iterator[Server]:
    """The one way tests start a real `solarapi serve` process (with `args`, on a free port).

    Readiness is polled, with a deadline, on /api/v1/health and on every URL in `ready`. The
    log is kept: in `log` (a file a long-lived fixture can show part of), else in a temporary
    file; its tail is attached to the report of a test that fails (see `keep_log`)."""
    port = free_port()
    # A file, not a pipe: nobody reads the pipe while the server runs, and a server that
    # logs one JSON line per request would block once the pipe's 64 KiB buffer is full.
    out = log.open("w+b") if log else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port), *args],
        # Warm start off unless a test asks for it: the sandbox model and the report renderer
        # then load on first use, saving each server ~1.7 s of CPU (the suite starts dozens).
        env={**os.environ, "SOLARAPI_WARM_START": "false", **env},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    server = Server(f"http://127.0.0.1:{port}", process, out)
    try:
        # Generous: the inline job runner imports every handler (matplotlib for reports) at
        # start-up, and the test machine is shared and often loaded.
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
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        keep_log(f"solarapi serve on port {port}", out)
        out.close()


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that gives a `solarapi` process (a command, `serve`, a worker) the
    database, data directory and secret key of `settings`, plus the variables in `extra`: the
    one way a test hands its settings to a process."""
    return {
        "SOLARAPI_DATABASE_URL": settings.database_url,
        "SOLARAPI_DATA_DIR": str(settings.data_dir),
        "SOLARAPI_SECRET_KEY": settings.secret_key,
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


def json_of(response: httpx.Response) -> Any:
    return response.json()


def run(coro: Any) -> Any:
    return asyncio.get_event_loop().run_until_complete(coro)
