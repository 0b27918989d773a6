"""What /health answers: is the database usable, is the shared rate-limit store reachable.

Load balancers poll it, so it is cheap: one statement outside any session (`schema_revision`)
and the limiter's own check. Concurrent calls share one probe in flight instead of each
sending its own; a call never reuses a finished probe's answer, so a fault (or a recovery) is
seen by the first call that starts after it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

from solarapi.db import schema_revision
from solarapi.dbfaults import SCHEMA_REVISION, is_database_unavailable, revision_is_current
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.timefmt import format_timestamp
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


class HealthProbe:
    def __init__(self, engine: AsyncEngine, limiter: RateLimiter) -> None:
        self._engine = engine
        self._limiter = limiter
        self._running: asyncio.Future[Checks] | None = None

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
        return "ok"


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
