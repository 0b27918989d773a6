"""SQL for API keys and the account they belong to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery
from solarapi.models import Account, ApiKey


@dataclass(frozen=True, slots=True)
class KeyRecord:
    key_id: str
    key_name: str
    environment: str
    display: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    account_id: str
    account_name: str
    plan: str
    sandbox_provisioned: bool
    account_disabled: bool = False


# Every authenticated request runs this: compiled once, one hand-over to the driver.
_KEY_BY_HASH = DriverQuery(
    select(
        ApiKey.id,
        ApiKey.name,
        ApiKey.environment,
        ApiKey.display,
        ApiKey.created_at,
        ApiKey.last_used_at,
        ApiKey.revoked_at,
        Account.id,
        Account.name,
        Account.plan,
        Account.sandbox_provisioned_at,
        Account.disabled_at,
    )
    .join(Account, Account.id == ApiKey.account_id)
    .where(ApiKey.key_hash == bindparam("key_hash"))
)


async def find_key_by_hash(session: AsyncSession, key_hash: str) -> KeyRecord | None:
    row = await _KEY_BY_HASH.first(session, {"key_hash": key_hash})
    if row is None:
        return None
    key_id, key_name, environment, display, created_at, last_used_at, revoked_at = row[:7]
    return KeyRecord(
        key_id=key_id,
        key_name=key_name,
        environment=environment,
        display=display,
        created_at=created_at,
        last_used_at=last_used_at,
        revoked_at=revoked_at,
        account_id=row[7],
        account_name=row[8],
        plan=row[9],
        sandbox_provisioned=row[10] is not None,
        account_disabled=row[11] is not None,
    )


async def touch_last_used(
    session: AsyncSession, key_id: str, now: datetime, older_than: datetime
) -> bool:
    """Set last_used_at unless another request already did within the resolution.

    The condition sits in the UPDATE itself so that concurrent requests of one key (several
    workers, several hosts) still write at most once per resolution period.
    """
    result = await session.execute(
        update(ApiKey)
        .where(
            ApiKey.id == key_id,
            or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at <= older_than),
        )
        .values(last_used_at=now)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))


async def list_keys(session: AsyncSession, account_id: str) -> list[ApiKey]:
    result = await session.scalars(
        select(ApiKey).where(ApiKey.account_id == account_id).order_by(ApiKey.created_at, ApiKey.id)
    )
    return list(result)


async def get_key(session: AsyncSession, key_id: str) -> ApiKey | None:
    return await session.get(ApiKey, key_id)


async def add_key(session: AsyncSession, key: ApiKey) -> None:
    session.add(key)
    await session.flush()
