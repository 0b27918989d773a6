"""SQL of ingest tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models.ingest import IngestToken
from solarapi.models.systems import System


@dataclass(frozen=True, slots=True)
class TokenOwner:
    """A token found by its hash, with what its request needs of its system."""

    token_id: str
    token_name: str
    display: str
    last_used_at: datetime | None
    revoked_at: datetime | None
    system_id: str
    account_id: str
    environment: str


async def add(session: AsyncSession, token: IngestToken) -> None:
    session.add(token)
    await session.flush()


async def list_for_system(session: AsyncSession, system_id: str) -> list[IngestToken]:
    """Every token of the system, revoked ones included, oldest first."""
    result = await session.scalars(
        select(IngestToken)
        .where(IngestToken.system_id == system_id)
        .order_by(IngestToken.created_at, IngestToken.id)
    )
    return list(result)


async def get(session: AsyncSession, token_id: str) -> IngestToken | None:
    return await session.get(IngestToken, token_id)


async def find_by_hash(session: AsyncSession, token_hash: str) -> TokenOwner | None:
    row = (
        await session.execute(
            select(
                IngestToken.id,
                IngestToken.name,
                IngestToken.display,
                IngestToken.last_used_at,
                IngestToken.revoked_at,
                System.id,
                System.account_id,
                System.environment,
            )
            .join(System, System.id == IngestToken.system_id)
            .where(IngestToken.token_hash == token_hash)
        )
    ).first()
    return None if row is None else TokenOwner(*row)


async def touch_last_used(session: AsyncSession, token_id: str, now: datetime) -> None:
    await session.execute(
        update(IngestToken).where(IngestToken.id == token_id).values(last_used_at=now)
    )
