"""SQL for web sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models import Account, User
from solarapi.models.dashboard import WebSession


async def add_session(session: AsyncSession, web_session: WebSession) -> None:
    session.add(web_session)
    await session.flush()


async def find_session(
    session: AsyncSession, token_hash: str
) -> tuple[WebSession, User, Account] | None:
    row = (
        await session.execute(
            select(WebSession, User, Account)
            .join(User, User.id == WebSession.user_id)
            .join(Account, Account.id == User.account_id)
            .where(WebSession.token_hash == token_hash)
        )
    ).first()
    if row is None:
        return None
    web_session, user, account = row
    return web_session, user, account


async def delete_session(session: AsyncSession, session_id: str) -> None:
    await session.execute(delete(WebSession).where(WebSession.id == session_id))


async def delete_expired(session: AsyncSession, now: datetime) -> None:
    await session.execute(delete(WebSession).where(WebSession.expires_at <= now))


async def delete_sessions_of_user(session: AsyncSession, user_id: str) -> int:
    result = await session.execute(delete(WebSession).where(WebSession.user_id == user_id))
    return int(getattr(result, "rowcount", 0) or 0)


async def delete_sessions_of_account(session: AsyncSession, account_id: str) -> int:
    users = select(User.id).where(User.account_id == account_id)
    result = await session.execute(delete(WebSession).where(WebSession.user_id.in_(users)))
    return int(getattr(result, "rowcount", 0) or 0)
