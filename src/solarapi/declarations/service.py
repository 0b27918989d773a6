"""Declaration rules. (Owned by the declarations issue; this entry point exists early because
deleting a system must ask it.)"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession


async def blocks_system_deletion(session: AsyncSession, system_id: str) -> bool:
    """True while the system has a submitted or approved declaration."""
    return False
