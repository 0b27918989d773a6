"""Demo data of the systems area for the demo accounts (idempotent)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.plans import Plan


async def add_demo_data(session: AsyncSession, account_id: str, plan: Plan, now: datetime) -> None:
    return None
