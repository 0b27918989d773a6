"""Recording events. Call `record_event` inside the same session (transaction) as the change
it describes, so an event exists if and only if its change committed (the outbox pattern).

Owned by the webhooks issue; until it lands this records nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession


async def record_event(
    session: AsyncSession,
    *,
    account_id: str,
    environment: str,
    event_type: str,
    data: dict[str, Any],
) -> None:
    """Add an event (e.g. "system.created") with `data` = the object as the API shows it."""
    return None
