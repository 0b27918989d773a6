"""Shared set-up of the benchmarks: a fresh migrated database (SQLite in a temp dir, or a new
PostgreSQL database), a real `solarapi serve` on 127.0.0.1, and `call_asgi` for measuring the
app in-process.

Scripts import it with `sys.path.insert(0, <bench dir>)`; bench/ is not a package.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from solarapi.config import Settings
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
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
        else:
            shutil.rmtree(data_dir, ignore_errors=True)  # (it was left in /tmp, one per run)
            if db_name:
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
def server_process(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A single-worker `solarapi serve` with `env`; yields its base URL and process id."""
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
        yield base, server.pid
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def serving(env: dict[str, str]) -> Iterator[str]:
    """A single-worker `solarapi serve` with `env`; yields its base URL."""
    with server_process(env) as (base, _):
        yield base


async def make_account(
    settings: Settings, keys: int, plan: Plan = Plan.ENTERPRISE
) -> tuple[str, list[str]]:
    """A fresh account with `keys` live keys (each key has its own rate-limit windows)."""
    from solarapi.accounts.service import create_account
    from solarapi.auth.service import create_key
    from solarapi.db import create_oneshot_engine, sessionmaker_for

    engine = create_oneshot_engine(settings)
    made: list[str] = []
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            created = await create_account(
                session, name="Bench", email=f"bench-{uuid.uuid4().hex[:8]}@example.com",
                password="bench password 123", plan=plan, now=utcnow(),
            )  # fmt: skip
            for i in range(keys):
                _, key = await create_key(
                    session, account_id=created.account.id, name=f"bench {i}",
                    environment=Environment.LIVE, secret=settings.effective_secret_key,
                    now=utcnow(),
                )  # fmt: skip
                made.append(key.key)
    finally:
        await engine.dispose()
    return created.account.id, made


def upload_a_year(client: httpx.Client, system_id: str, start: datetime, end: datetime) -> None:
    """Upload a synthetic day curve (sine from 04:00 to 20:00 UTC, 1.5 kWh peak per
    quarter-hour) for [start, end) through the API, in batches of 10,000."""
    batch: list[dict[str, object]] = []
    for t in range(int(start.timestamp()), int(end.timestamp()), 900):
        hour = (t % 86400) / 3600
        energy = max(0.0, 1500 * math.sin((hour - 4) / 16 * math.pi)) if 4 <= hour <= 20 else 0.0
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        batch.append({"timestamp": stamp, "energy_wh": round(energy, 1)})
        if len(batch) == 10_000 or t + 900 >= int(end.timestamp()):
            client.post(
                f"/api/v1/systems/{system_id}/readings", json={"readings": batch}
            ).raise_for_status()
            batch = []


async def call_asgi(app: Any, key: str, path: str, query: str = "") -> tuple[int, bytes]:
    """One GET through the ASGI `app` in this process, with `key` as the bearer: no socket, no
    HTTP parser, so CPU measured around it is the app's own. Returns the status and body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
    }
    status, body = 0, bytearray()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, bytes(body)


# --- CPU accounting from /proc (server processes, PostgreSQL backends) ----------------------

TICK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (a server's workers)."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(tree.get(current, []))
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of `pids` so far (processes that have exited count nothing)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK
