"""SQL of the sandbox: claiming an account's one-time provisioning."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CursorResult, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models import Account


async def claim_provisioning(session: AsyncSession, account_id: str, now: datetime) -> bool:
    """Mark the account's sandbox as provisioned; True only for the one caller that did.

    A conditional UPDATE is the lock: on PostgreSQL a concurrent transaction waits for the row
    and then re-checks `IS NULL` (READ COMMITTED), on SQLite writers are serialised; either
    way exactly one transaction sees one updated row.
    """
    result = await session.execute(
        update(Account)
        .where(Account.id == account_id, Account.sandbox_provisioned_at.is_(None))
        .values(sandbox_provisioned_at=now)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1
