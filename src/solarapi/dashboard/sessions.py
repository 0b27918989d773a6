"""Web sessions: a random cookie token, stored server-side only as its HMAC.

Sessions end on log-out, after `IDLE_TIMEOUT` without a request, and at the latest
`MAX_LIFETIME` after log-in. A new session is issued on every log-in (no fixation).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.dashboard import repository
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Plan
from solarapi.models.dashboard import WebSession

IDLE_TIMEOUT = timedelta(hours=12)
MAX_LIFETIME = timedelta(days=7)
# last_seen_at is written at most this often, so browsing does not write on every page.
TOUCH_RESOLUTION = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class WebUser:
    """The person behind a dashboard request."""

    session_id: str
    user_id: str
    user_name: str
    email: str
    account_id: str
    account_name: str
    plan: Plan
    last_form_nonce: str | None


def token_hash(token: str, secret: bytes) -> str:
    return hmac.new(secret, b"web-session:" + token.encode("ascii"), hashlib.sha256).hexdigest()


async def start_session(
    session: AsyncSession, *, user_id: str, secret: bytes, now: datetime
) -> str:
    """Create a session and return the cookie token (the only time it exists in clear)."""
    token = secrets.token_urlsafe(32)
    await repository.delete_expired(session, now)
    await repository.add_session(
        session,
        WebSession(
            id=new_id("ses"),
            token_hash=token_hash(token, secret),
            user_id=user_id,
            created_at=now,
            last_seen_at=now,
            expires_at=now + MAX_LIFETIME,
        ),
    )
    return token


async def resolve_session(
    session: AsyncSession, *, token: str | None, secret: bytes, now: datetime
) -> WebUser | None:
    if not token or len(token) > 128 or not token.isascii():
        return None
    found = await repository.find_session(session, token_hash(token, secret))
    if found is None:
        return None
    web_session, user, account = found
    if (
        now >= web_session.expires_at
        or now - web_session.last_seen_at >= IDLE_TIMEOUT
        or account.disabled_at is not None
    ):
        await repository.delete_session(session, web_session.id)
        return None
    if now - web_session.last_seen_at >= TOUCH_RESOLUTION:
        web_session.last_seen_at = now
        await session.flush()
    return WebUser(
        session_id=web_session.id,
        user_id=user.id,
        user_name=user.name,
        email=user.email,
        account_id=account.id,
        account_name=account.name,
        plan=account.plan,
        last_form_nonce=web_session.last_form_nonce,
    )


async def end_session(session: AsyncSession, session_id: str) -> None:
    await repository.delete_session(session, session_id)


async def claim_form_nonce(session: AsyncSession, *, session_id: str, nonce: str) -> bool:
    """True the first time a session submits `nonce`; False for a re-submission."""
    web_session = await session.get(WebSession, session_id)
    if web_session is None or web_session.last_form_nonce == nonce:
        return False
    web_session.last_form_nonce = nonce
    await session.flush()
    return True
