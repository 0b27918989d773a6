"""SQL for the audit trail."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models.audit import AuditEvent


async def add(session: AsyncSession, event: AuditEvent) -> None:
    session.add(event)
    await session.flush()


async def newest(
    session: AsyncSession, *, account_id: str | None, before: datetime | None, limit: int
) -> list[AuditEvent]:
    """Newest first; one account's when `account_id` is given."""
    query = select(AuditEvent)
    if account_id is not None:
        query = query.where(AuditEvent.account_id == account_id)
    if before is not None:
        query = query.where(AuditEvent.occurred_at < before)
    query = query.order_by(AuditEvent.occurred_at.desc(), AuditEvent.id.desc()).limit(limit)
    return list(await session.scalars(query))


async def delete_for_account(session: AsyncSession, account_id: str) -> int:
    result = await session.execute(delete(AuditEvent).where(AuditEvent.account_id == account_id))
    return int(getattr(result, "rowcount", 0) or 0)
