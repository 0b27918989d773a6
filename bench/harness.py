"""Shared set-up of the benchmarks: a fresh migrated database (SQLite in a temp dir, or a new
PostgreSQL database) and a real `solarapi serve` on 127.0.0.1.

Scripts import it with `sys.path.insert(0, <bench dir>)`; bench/ is not a package.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from solarapi.config import Settings
from solarapi.migrate import upgrade

SECRET = "bench-secret-key-that-is-long-enough-0123456789"
PG_ADMIN = os.environ.get("SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass(frozen=True)
class BenchDatabase:
    settings: Settings
    env: dict[str, str]  # SOLARAPI_* variables for a server or worker on this database


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def fresh_database(name: str, backend: str, *, keep: bool = False) -> Iterator[BenchDatabase]:
    """A migrated database of `backend` ("sqlite" | "postgres"), dropped afterwards unless
    `keep` (then its location is printed, for profiling)."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-{backend}-"))
    env = {
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_SECRET_KEY": SECRET,
        "SOLARAPI_JOB_RUNNER": "external",
    }
    db_name = None
    if backend == "postgres":
        db_name = f"bench_{name}_{uuid.uuid4().hex[:8]}"
        subprocess.run(["psql", PG_ADMIN, "-qc", f'CREATE DATABASE "{db_name}"'], check=True)
        env["SOLARAPI_DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{db_name}"
    settings = Settings(
        data_dir=data_dir, secret_key=SECRET, database_url=env.get("SOLARAPI_DATABASE_URL", "")
    )
    upgrade(settings)
    try:
        yield BenchDatabase(settings, env)
    finally:
        if keep:
            print(f"kept: {' '.join(f'{k}={v}' for k, v in env.items())}")
        elif db_name:
            subprocess.run(
                ["psql", PG_ADMIN, "-qc", f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'],
                check=False,
            )


def wait_for(base: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{base}/api/v1/health", timeout=1)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def serving(env: dict[str, str]) -> Iterator[str]:
    """A single-worker `solarapi serve` with `env`; yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port)],
        env={**os.environ, **env, "SOLARAPI_LOG_LEVEL": "WARNING"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(base)
        yield base
    finally:
        server.terminate()
        server.wait(10)
