"""What /health answers: is the database usable, is the shared rate-limit store reachable.

Load balancers poll it, so it is cheap: one statement outside any session (`schema_revision`),
on SQLite one page written beside the database at most once a second (a full disk refuses
writes while reads still work), and the limiter's own check. Concurrent calls share one probe in flight instead of each
sending its own; a call never reuses a finished probe's answer, so a fault (or a recovery) is
seen by the first call that starts after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

from solarapi.db import schema_revision
from solarapi.dbfaults import SCHEMA_REVISION, is_database_unavailable, revision_is_current
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.timefmt import format_timestamp
from solarapi.kit.tzdb import TZDATA_VERSION
from solarapi.kit.version import API_VERSION
from solarapi.ratelimit.base import RateLimiter

# Looked up once: importlib.metadata scans the installed distributions on every call.
_VERSION = version("solarapi")
# A database that takes longer than this to answer one statement cannot serve the API.
_DATABASE_TIMEOUT_S = 2.0
log = logging.getLogger("solarapi.health")

DatabaseStatus = Literal["ok", "unavailable"]
LimiterStatus = Literal["ok", "degraded"]


@dataclass(frozen=True, slots=True)
class Checks:
    database: DatabaseStatus
    rate_limiter: LimiterStatus

    @property
    def status(self) -> Literal["ok", "degraded", "unavailable"]:
        if self.database != "ok":
            return "unavailable"
        return "degraded" if self.rate_limiter != "ok" else "ok"


# What the write check writes: a page, like the smallest write SQLite makes; how often.
_WRITE_PROBE_BYTES = 4096
_WRITE_CHECK_EVERY_S = 1.0


def can_write(directory: Path) -> str | None:
    """None when a new file of a page can be written in `directory`; else why not. SQLite's
    writes need the same: a full disk (ENOSPC), a read-only file system
    (EROFS), a file-size limit (EFBIG), a quota. The file is removed at once."""
    path = directory / f".health-{os.getpid()}"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # Space is reserved when written (no fsync needed to meet a full disk). A short
            # write is followed by one that says why.
            page = memoryview(b"\0" * _WRITE_PROBE_BYTES)
            while page:
                page = page[os.write(descriptor, page) :]
        finally:
            os.close(descriptor)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    return None


def sqlite_directory(engine: AsyncEngine) -> Path | None:
    """The directory of an SQLite database file (None: PostgreSQL, or in memory)."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).resolve().parent


class HealthProbe:
    def __init__(self, engine: AsyncEngine, limiter: RateLimiter) -> None:
        self._engine = engine
        self._limiter = limiter
        self._running: asyncio.Future[Checks] | None = None
        # On SQLite a database that answers reads may still refuse every write (a full
        # disk: writes got 503 while /health said ok), so the probe also writes.
        self._write_dir = sqlite_directory(engine)
        self._write_checked_until = 0.0
        self._write_answer: str | None = None

    async def checks(self) -> Checks:
        if self._running is None:
            self._running = asyncio.ensure_future(self._probe())
        # Shielded: a caller that goes away does not cancel the probe the others wait for.
        return await asyncio.shield(self._running)

    async def _probe(self) -> Checks:
        try:
            # One after the other, not gathered: each gathered awaitable is a task of its own,
            # and tasks were a quarter of /health's CPU; the limiter's check is instant unless
            # it is Redis (one more round trip of latency, no CPU).
            database = await self._database()
            limiter = await self._limiter.check()
        finally:
            # Cleared before any waiter resumes: a later call starts a probe of its own.
            self._running = None
        return Checks(database, "ok" if limiter == "ok" else "degraded")

    async def _database(self) -> DatabaseStatus:
        """ "ok" only when the API could serve: the database answers and its schema is this
        release's (an empty or unmigrated database fails every API request, so it is not
        ok)."""
        try:
            async with asyncio.timeout(_DATABASE_TIMEOUT_S):  # no task of its own, unlike wait_for
                revision = await schema_revision(self._engine)
        except Exception as exc:
            if not (is_database_unavailable(exc) or isinstance(exc, asyncio.TimeoutError)):
                log.exception("health check query failed")
            return "unavailable"
        if not revision_is_current(revision):
            log.error(
                "database schema at revision %s, this release needs %s: run `solarapi migrate`",
                revision,
                SCHEMA_REVISION,
            )
            return "unavailable"
        if self._write_dir is not None and self._write_problem() is not None:
            return "unavailable"
        return "ok"

    def _write_problem(self) -> str | None:
        """`can_write`, at most once a second (tens of µs on the loop: a file's create, write
        and removal); between two, the last answer."""
        now = time.monotonic()
        if now >= self._write_checked_until and self._write_dir is not None:
            answer = can_write(self._write_dir)
            if answer is not None and self._write_answer is None:
                log.error("the database's directory %s refuses writes: %s", self._write_dir, answer)
            elif answer is None and self._write_answer is not None:
                log.warning("the database's directory %s takes writes again", self._write_dir)
            self._write_answer = answer
            self._write_checked_until = now + _WRITE_CHECK_EVERY_S
        return self._write_answer


@functools.lru_cache(maxsize=1)
def _time_text(second: int) -> str:
    # Formatted once a second, not on every poll (strftime was ~4 % of /health's CPU).
    return format_timestamp(datetime.fromtimestamp(second, UTC))


def health_response(checks: Checks) -> OrjsonResponse:
    status = checks.status
    body = {
        "status": status,
        "version": _VERSION,
        "api_version": API_VERSION,
        "tzdata": TZDATA_VERSION,
        "time": _time_text(int(time.time())),
        "checks": {"database": checks.database, "rate_limiter": checks.rate_limiter},
    }
    headers = {"Cache-Control": "no-store"}
    if status == "unavailable":
        headers["Retry-After"] = "5"
    return OrjsonResponse(
        body, status_code=503 if status == "unavailable" else 200, headers=headers
    )


_LIVE_BODY = b'{"status":"ok"}'


def live_response() -> Response:
    """`/health/live`: the process answers. It asks nothing of the database or Redis."""
    return Response(
        _LIVE_BODY, media_type="application/json", headers={"Cache-Control": "no-store"}
    )
