"""Creating an account's simulated sandbox systems on its first sandbox request.
(Owned by the sandbox issue.)"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession


async def ensure_sandbox(session: AsyncSession, account_id: str, now: datetime) -> None:
    """Idempotent and safe under concurrent first requests: provisions at most once."""
    return None
