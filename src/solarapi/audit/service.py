"""Recording and reading the audit trail.

`record_audit` is the one way to write an entry: it adds the row in the caller's transaction
(so an action and its record commit or roll back together) and writes one JSON log line
(logger `solarapi.audit`) for log pipelines. Callers pass typed values, never free text: the
action is an `AuditAction`, the actor an `Actor`.
"""

from __future__ import annotations

import enum
import getpass
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.audit import repository
from solarapi.kit.ids import new_id
from solarapi.kit.timefmt import format_timestamp
from solarapi.models.audit import AuditEvent

log = logging.getLogger("solarapi.audit")

# An e-mail address typed into a log-in form is stored as typed, cut to this length.
_SUBJECT_MAX = 320


class AuditAction(enum.StrEnum):
    ACCOUNT_CREATED = "account.created"
    ACCOUNT_DISABLED = "account.disabled"
    ACCOUNT_ENABLED = "account.enabled"
    ACCOUNT_DELETED = "account.deleted"
    PLAN_CHANGED = "account.plan_changed"
    PASSWORD_CHANGED = "user.password_changed"  # noqa: S105 - an action name
    LOGIN_SUCCEEDED = "login.succeeded"
    LOGIN_FAILED = "login.failed"
    KEY_CREATED = "key.created"
    KEY_REVOKED = "key.revoked"
    INGEST_TOKEN_CREATED = "ingest_token.created"  # noqa: S105 - an action name
    INGEST_TOKEN_REVOKED = "ingest_token.revoked"  # noqa: S105 - an action name


ActorKind = Literal["operator", "user", "key", "token", "anonymous"]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted: the operator at the command line (by OS user), a signed-in dashboard user,
    an API key, an ingest token, or nobody known (a failed log-in)."""

    kind: ActorKind
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"

    @classmethod
    def operator(cls) -> Actor:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):  # a container user without a passwd entry
            name = f"uid {os.getuid()}"
        return cls("operator", name)

    @classmethod
    def user(cls, user_id: str) -> Actor:
        return cls("user", user_id)

    @classmethod
    def key(cls, key_id: str) -> Actor:
        return cls("key", key_id)

    @classmethod
    def token(cls, token_id: str) -> Actor:
        return cls("token", token_id)

    @classmethod
    def anonymous(cls) -> Actor:
        return cls("anonymous", "-")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry of the trail, as `solarapi audit list` shows it."""

    id: str
    occurred_at: datetime
    action: str
    actor: str
    account_id: str | None
    subject: str | None
    ip: str | None
    details: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "occurred_at": format_timestamp(self.occurred_at),
            "action": self.action,
            "actor": self.actor,
            "account_id": self.account_id,
            "subject": self.subject,
            "ip": self.ip,
            "details": dict(self.details),
        }


def _entry(event: AuditEvent) -> AuditEntry:
    return AuditEntry(
        id=event.id,
        occurred_at=event.occurred_at,
        action=event.action,
        actor=event.actor,
        account_id=event.account_id,
        subject=event.subject,
        ip=event.ip,
        details=dict(event.details or {}),
    )


async def record_audit(
    session: AsyncSession,
    action: AuditAction,
    *,
    actor: Actor,
    account_id: str | None,
    now: datetime,
    subject: str | None = None,
    ip: str | None = None,
    details: Mapping[str, str] | None = None,
) -> AuditEntry:
    """Add one entry in the caller's transaction and write its JSON log line."""
    event = AuditEvent(
        id=new_id("aud"),
        occurred_at=now,
        action=action.value,
        actor=str(actor)[:200],
        account_id=account_id,
        subject=None if subject is None else subject[:_SUBJECT_MAX],
        ip=ip,
        details=dict(details or {}),
    )
    await repository.add(session, event)
    entry = _entry(event)
    log.info(
        "audit",
        extra={
            "audit_id": entry.id,
            "action": entry.action,
            "actor": entry.actor,
            "account_id": entry.account_id,
            "subject": entry.subject,
            "client_ip": entry.ip,
            "details": dict(entry.details),
        },
    )
    return entry


async def list_audit(
    session: AsyncSession, *, account_id: str | None, limit: int, before: datetime | None = None
) -> list[AuditEntry]:
    return [
        _entry(event)
        for event in await repository.newest(
            session, account_id=account_id, before=before, limit=limit
        )
    ]
