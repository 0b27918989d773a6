"""The job queue's public entry points. (Owned by the reports issue, which implements the
runner; webhook deliveries use the same queue.)

- `enqueue(session, kind, payload, run_at=None)` adds a job in the caller's transaction, so
  a job exists if and only if the change that asked for it committed.
- `job_handler(kind)` registers the coroutine that runs jobs of that kind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

JobHandler = Callable[[async_sessionmaker[AsyncSession], dict[str, Any]], Awaitable[None]]
HANDLERS: dict[str, JobHandler] = {}


def job_handler(kind: str) -> Callable[[JobHandler], JobHandler]:
    def register(handler: JobHandler) -> JobHandler:
        HANDLERS[kind] = handler
        return handler

    return register


async def enqueue(
    session: AsyncSession,
    kind: str,
    payload: dict[str, Any],
    *,
    run_at: datetime | None = None,
    max_attempts: int = 5,
) -> str:
    """Queue a job of `kind` in the caller's transaction; returns the job id."""
    raise NotImplementedError("the job queue lands with the reports issue")
