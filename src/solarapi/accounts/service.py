"""Creating accounts with their first user, plan changes and logins."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts import repository
from solarapi.accounts.passwords import hash_password, password_problem, verify_password
from solarapi.errors import Conflict, NotFound, ValidationFailed
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Plan
from solarapi.kit.text import excerpt
from solarapi.models import Account, User

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}$")


@dataclass(frozen=True, slots=True)
class NewAccount:
    account: Account
    user: User


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > 320 or not _EMAIL.match(email):
        raise ValidationFailed(f"'{excerpt(email)}' is not a valid e-mail address")
    return email


async def create_account(
    session: AsyncSession,
    *,
    name: str,
    email: str,
    password: str,
    plan: Plan,
    now: datetime,
) -> NewAccount:
    name = name.strip()
    if not 1 <= len(name) <= 200:
        raise ValidationFailed("name must be 1–200 characters")
    email = normalize_email(email)
    problem = password_problem(password)
    if problem:
        raise ValidationFailed(problem)
    # Hash before looking the e-mail up, so a taken address costs the same time as a new one.
    password_hash = await hash_password(password)
    if await repository.find_user_by_email(session, email) is not None:
        raise Conflict(f"An account with the e-mail {excerpt(email)} already exists")
    account = Account(id=new_id("acct"), name=name, plan=plan, created_at=now)
    user = User(
        id=new_id("usr"),
        account_id=account.id,
        name=name,
        email=email,
        password_hash=password_hash,
        created_at=now,
    )
    await repository.add(session, account)
    await repository.add(session, user)
    return NewAccount(account, user)


async def set_plan(session: AsyncSession, *, email_or_id: str, plan: Plan) -> Account:
    account = await find_account(session, email_or_id)
    account.plan = plan
    await session.flush()
    return account


async def find_account(session: AsyncSession, email_or_id: str) -> Account:
    if email_or_id.startswith("acct_"):
        account = await repository.get_account(session, email_or_id)
    else:
        user = await repository.find_user_by_email(session, email_or_id)
        account = None if user is None else await repository.get_account(session, user.account_id)
    if account is None:
        raise NotFound(f"No account with e-mail or id '{excerpt(email_or_id)}'")
    return account


async def change_password(session: AsyncSession, *, email: str, password: str) -> User:
    """Set a user's dashboard password (the operator's reset; there is no e-mail flow)."""
    problem = password_problem(password)
    if problem:
        raise ValidationFailed(problem)
    user = await repository.find_user_by_email(session, email)
    if user is None:
        raise NotFound(f"No user with e-mail '{excerpt(email)}'")
    user.password_hash = await hash_password(password)
    await session.flush()
    return user


async def check_login(session: AsyncSession, *, email: str, password: str) -> User | None:
    user = await repository.find_user_by_email(session, email)
    ok = await verify_password(None if user is None else user.password_hash, password)
    return user if ok else None
