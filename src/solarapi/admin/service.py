"""What the operator does to accounts from the command line, each step recorded in the audit
trail (`audit.record_audit`) in the same transaction as the change itself."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts.service import change_password, find_account
from solarapi.admin import repository
from solarapi.audit import repository as audit_repository
from solarapi.audit.service import Actor, AuditAction, record_audit
from solarapi.auth import repository as keys_repository
from solarapi.auth.keys import NewKey
from solarapi.auth.service import create_key, revoke_key
from solarapi.dashboard import repository as sessions_repository
from solarapi.kit.plans import Environment, Plan
from solarapi.models import Account, ApiKey, User
from solarapi.reports.storage import ReportStorage

log = logging.getLogger("solarapi.admin")


@dataclass(frozen=True, slots=True)
class PasswordChanged:
    user: User
    sessions_ended: int


@dataclass(frozen=True, slots=True)
class AccountState:
    account: Account
    changed: bool  # False: it already was in the state asked for
    sessions_ended: int = 0


@dataclass(frozen=True, slots=True)
class ErasedAccount:
    """What a deletion removed: rows per table, jobs, and the report files to delete once
    the transaction has committed (`delete_report_files`)."""

    account_id: str
    rows: dict[str, int]
    jobs: int
    report_files: list[str]


async def set_password(
    session: AsyncSession, *, email: str, password: str, actor: Actor, now: datetime
) -> PasswordChanged:
    """New password; every dashboard session of the user ends (whoever had the old password
    is logged out)."""
    user = await change_password(session, email=email, password=password)
    ended = await sessions_repository.delete_sessions_of_user(session, user.id)
    await record_audit(
        session,
        AuditAction.PASSWORD_CHANGED,
        actor=actor,
        account_id=user.account_id,
        subject=user.email,
        now=now,
        details={"sessions_ended": str(ended)},
    )
    return PasswordChanged(user, ended)


async def disable_account(
    session: AsyncSession, *, email_or_id: str, actor: Actor, now: datetime
) -> AccountState:
    """Refuse the account's keys (401) and log-ins, and end its dashboard sessions. Nothing
    is deleted: `enable_account` restores it as it was."""
    account = await find_account(session, email_or_id)
    ended = await sessions_repository.delete_sessions_of_account(session, account.id)
    if account.disabled_at is not None:
        return AccountState(account, changed=False, sessions_ended=ended)
    account.disabled_at = now
    await session.flush()
    await record_audit(
        session,
        AuditAction.ACCOUNT_DISABLED,
        actor=actor,
        account_id=account.id,
        now=now,
        details={"sessions_ended": str(ended)},
    )
    return AccountState(account, changed=True, sessions_ended=ended)


async def enable_account(
    session: AsyncSession, *, email_or_id: str, actor: Actor, now: datetime
) -> AccountState:
    account = await find_account(session, email_or_id)
    if account.disabled_at is None:
        return AccountState(account, changed=False)
    account.disabled_at = None
    await session.flush()
    await record_audit(
        session, AuditAction.ACCOUNT_ENABLED, actor=actor, account_id=account.id, now=now
    )
    return AccountState(account, changed=True)


async def delete_account(
    session: AsyncSession, *, email_or_id: str, actor: Actor, now: datetime
) -> ErasedAccount:
    """Erase the account and everything tied to it: users and their sessions, keys,
    systems with their readings, declarations, reports (rows here; files after the commit),
    webhooks, events, queued jobs, and its audit entries (they hold e-mail and IP addresses).
    One entry stays: that the account was deleted, by whom and when — its id only."""
    account = await find_account(session, email_or_id)
    files = await repository.report_files(session, account.id)
    ids = await repository.owned_ids(session, account.id)
    jobs = await repository.delete_jobs(session, await repository.jobs_naming(session, ids))
    rows = await repository.erase_account(session, account.id)
    rows.pop("audit_events", None)
    await audit_repository.delete_for_account(session, account.id)
    await record_audit(
        session,
        AuditAction.ACCOUNT_DELETED,
        actor=actor,
        account_id=account.id,
        now=now,
        details={table: str(count) for table, count in sorted(rows.items())},
    )
    return ErasedAccount(account.id, rows, jobs, files)


async def delete_report_files(storage: ReportStorage, erased: ErasedAccount) -> int:
    """Delete the erased account's report files; returns how many could not be deleted
    (they are unreferenced now, and the reports clean-up removes them later)."""
    failed = 0
    for name in erased.report_files:
        try:
            await storage.delete(name)
        except Exception:
            failed += 1
            log.warning("could not delete report file %s of a deleted account", name, exc_info=True)
    return failed


async def change_plan(
    session: AsyncSession, *, email_or_id: str, plan: Plan, actor: Actor, now: datetime
) -> Account:
    account = await find_account(session, email_or_id)
    before = account.plan
    account.plan = plan
    await session.flush()
    if before != plan.value:
        await record_audit(
            session,
            AuditAction.PLAN_CHANGED,
            actor=actor,
            account_id=account.id,
            now=now,
            details={"from": before, "to": plan.value},
        )
    return account


async def issue_key(
    session: AsyncSession,
    *,
    email_or_id: str,
    name: str,
    environment: Environment,
    secret: bytes,
    actor: Actor,
    now: datetime,
) -> tuple[Account, ApiKey, NewKey]:
    account = await find_account(session, email_or_id)
    record, new = await create_key(
        session, account_id=account.id, name=name, environment=environment, secret=secret, now=now
    )
    await record_audit(
        session,
        AuditAction.KEY_CREATED,
        actor=actor,
        account_id=account.id,
        subject=record.id,
        now=now,
        details={"environment": record.environment, "display": record.display},
    )
    return account, record, new


async def withdraw_key(
    session: AsyncSession, *, key_id: str, actor: Actor, now: datetime
) -> ApiKey:
    """Revoke a key by id (any account's: the operator's command)."""
    found = await keys_repository.get_key(session, key_id)
    was_active = found is not None and found.revoked_at is None
    key = await revoke_key(session, key_id=key_id, now=now)
    if was_active:
        await record_audit(
            session,
            AuditAction.KEY_REVOKED,
            actor=actor,
            account_id=key.account_id,
            subject=key.id,
            now=now,
            details={"environment": key.environment, "display": key.display},
        )
    return key
