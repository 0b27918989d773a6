"""SQL for events."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.plans import Environment
from solarapi.models.webhooks import Event, WebhookEndpoint


async def add(session: AsyncSession, event: Event) -> None:
    session.add(event)
    await session.flush()


async def get(session: AsyncSession, event_id: str) -> Event | None:
    return await session.get(Event, event_id)


async def list_page(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    event_type: str | None,
    since: datetime,
    offset: int,
    limit: int,
) -> tuple[list[Event], int]:
    conditions = [
        Event.account_id == account_id,
        Event.environment == environment,
        Event.created_at >= since,
    ]
    if event_type is not None:
        conditions.append(Event.type == event_type)
    total = await session.scalar(select(func.count()).select_from(Event).where(*conditions))
    rows = await session.scalars(
        select(Event)
        .where(*conditions)
        .order_by(Event.created_at.desc(), Event.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return list(rows), int(total or 0)


async def delete_older_than(session: AsyncSession, cutoff: datetime) -> int:
    """Delete events created before `cutoff` (their delivery rows go with them by cascade)."""
    result = await session.execute(delete(Event).where(Event.created_at < cutoff))
    return int(getattr(result, "rowcount", 0) or 0)


async def enabled_endpoints(
    session: AsyncSession, *, account_id: str, environment: Environment
) -> list[WebhookEndpoint]:
    """The endpoints an event of this account and environment may go to (the caller checks
    each one's subscribed types)."""
    rows = await session.scalars(
        select(WebhookEndpoint)
        .where(
            WebhookEndpoint.account_id == account_id,
            WebhookEndpoint.environment == environment,
            WebhookEndpoint.enabled.is_(True),
        )
        .order_by(WebhookEndpoint.created_at, WebhookEndpoint.id)
    )
    return list(rows)
