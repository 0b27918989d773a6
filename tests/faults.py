"""Support for fault tests: a scratch PostgreSQL database of a test's own (to drop, rename or
break without touching anyone else's) and a real `solarapi serve` whose JSON log is read back
and printed when the test fails."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import asyncpg
import httpx
import orjson
from sqlalchemy.engine import make_url

from tests.conftest import TEST_SECRET
from tests.support import POSTGRES_ADMIN_URL, SERVER_START_SECONDS, free_port


async def admin_connection(database: str | None = None) -> asyncpg.Connection:
    """A connection to the admin database, or to `database` on the same server."""
    url = make_url(POSTGRES_ADMIN_URL)
    return await asyncpg.connect(
        host=url.host, port=url.port or 5432, user=url.username, database=database or url.database
    )


async def admin(sql: str, database: str | None = None) -> None:
    conn = await admin_connection(database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def database_url(name: str) -> str:
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (unmigrated); yields its name. Dropped afterwards
    under either of the names a test may have given it."""
    name = f"solarapi_fault_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        for candidate in (name, f"{name}_moved"):
            await admin(f'DROP DATABASE IF EXISTS "{candidate}" WITH (FORCE)')


@dataclass
class Server:
    base: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def lines(self) -> list[dict[str, Any]]:
        self.log.seek(0)
        return [
            orjson.loads(line) for line in self.log.read().splitlines() if line.startswith(b"{")
        ]

    def text(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


@contextmanager
def served(env: dict[str, str], *args: str) -> Iterator[Server]:
    """A real `solarapi serve` process; its whole log is printed if the body fails."""
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "solarapi", "serve", "--port", str(port), *args],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            assert process.poll() is None, f"server exited:\n{server.text()}"
            try:
                httpx.get(f"{server.base}/api/v1/health", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        yield server
    except BaseException:
        print(f"--- server log ---\n{server.text()}", file=sys.stderr)
        raise
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def server_env(database: str, data_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "SOLARAPI_DATABASE_URL": database,
        "SOLARAPI_SECRET_KEY": TEST_SECRET,
        "SOLARAPI_DATA_DIR": str(data_dir),
        "SOLARAPI_JOB_RUNNER": "external",
        "SOLARAPI_REDIS_URL": "",
        **extra,
    }
