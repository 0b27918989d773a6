"""SQL of ingest tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery
from solarapi.models import Account
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
    account_disabled: bool = False


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


_BY_HASH = DriverQuery(
    select(
        IngestToken.id,
        IngestToken.name,
        IngestToken.display,
        IngestToken.last_used_at,
        IngestToken.revoked_at,
        System.id,
        System.account_id,
        System.environment,
        Account.disabled_at,
    )
    .join(System, System.id == IngestToken.system_id)
    .join(Account, Account.id == System.account_id)
    .where(IngestToken.token_hash == bindparam("hash"))
)


async def find_by_hash(session: AsyncSession, token_hash: str) -> TokenOwner | None:
    """The token and its owner, read straight through the driver (outside a transaction: a
    lone read, `db.DriverQuery`), as every logger's upload begins with it."""
    row = await _BY_HASH.first(session, {"hash": token_hash})
    if row is None:
        return None
    token_id, name, display, last_used_at, revoked_at, system_id, account_id, environment = row[:8]
    return TokenOwner(
        token_id,
        name,
        display,
        last_used_at,
        revoked_at,
        system_id,
        account_id,
        environment,
        account_disabled=row[8] is not None,
    )


async def touch_last_used(
    session: AsyncSession, token_id: str, now: datetime, older_than: datetime
) -> None:
    """Set last_used_at unless another request already did since `older_than`: the
    condition sits in the UPDATE, so concurrent requests write at most once per period."""
    await session.execute(
        update(IngestToken)
        .where(
            IngestToken.id == token_id,
            or_(IngestToken.last_used_at.is_(None), IngestToken.last_used_at <= older_than),
        )
        .values(last_used_at=now)
        .execution_options(synchronize_session=False)
    )
