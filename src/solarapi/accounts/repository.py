"""SQL for accounts and users."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models import Account, User


async def get_account(session: AsyncSession, account_id: str) -> Account | None:
    return await session.get(Account, account_id)


async def find_user_by_email(session: AsyncSession, email: str) -> User | None:
    return await session.scalar(select(User).where(User.email == email.strip().lower()))


async def list_accounts(session: AsyncSession) -> list[tuple[Account, str | None]]:
    """Accounts with the e-mail of their first user, oldest first."""
    first_email = (
        select(func.min(User.email)).where(User.account_id == Account.id).scalar_subquery()
    )
    rows = await session.execute(select(Account, first_email).order_by(Account.created_at))
    return [(account, email) for account, email in rows]


async def add(session: AsyncSession, *objects: Account | User) -> None:
    session.add_all(objects)
    await session.flush()
