"""Rules of ingest tokens: issue (shown once), list, revoke, authenticate, and the upload a
token may do — the API's readings upload, for the token's one system."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.audit.service import Actor, AuditAction, record_audit
from solarapi.auth.principal import Caller, IngestCaller
from solarapi.auth.service import LAST_USED_RESOLUTION, bearer_token, mistyped
from solarapi.errors import NotFound, Unauthorized
from solarapi.ingest import repository
from solarapi.ingest.tokens import (
    PREFIX,
    TOKEN_PATTERN,
    display_form,
    generate_token,
    hash_token,
    well_formed,
)
from solarapi.kit.ids import new_id
from solarapi.kit.text import excerpt
from solarapi.models.ingest import IngestToken
from solarapi.models.systems import SystemRecord
from solarapi.readings.upload import (
    ReadingBatch,
    UploadResult,
    simulated_takes_no_upload,
    upload_to_system,
)
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import get_system, owned

# The one endpoint a token may call, relative to /api/v1 (the gateway routes by it).
INGEST_ROUTE = "/ingest/readings"
ONLY_INGEST = (
    "ingest tokens (ik_…) may only call POST /api/v1/ingest/readings; use an API key "
    "(pk_live_… or pk_test_…) for everything else"
)
PER_MINUTE = 60


@dataclass(frozen=True, slots=True)
class TokenView:
    """A token as every list shows it (never the token itself)."""

    id: str
    name: str
    display: str
    created_at: datetime
    last_used_at: datetime | None

    @classmethod
    def of(cls, token: IngestToken) -> TokenView:
        return cls(token.id, token.name, token.display, token.created_at, token.last_used_at)


@dataclass(frozen=True, slots=True)
class CreatedToken:
    """A new token: the only time the full token exists outside the logger."""

    view: TokenView
    token: str


async def create_token(
    session: AsyncSession,
    caller: Caller,
    system_id: str,
    name: str,
    secret: bytes,
    now: datetime,
    *,
    actor: Actor,
    ip: str | None,
) -> CreatedToken:
    """`name` as validated by `schemas.TokenCreate` (1–100 characters, not blank)."""
    system = await get_system(session, caller, system_id)
    if system.data_source == "simulated":
        # The one thing a token does, upload its system's readings, a simulated system
        # refuses (409): a token for it could never be used (the dashboard offers none).
        raise simulated_takes_no_upload(
            system.id,
            "its readings come from the sandbox model",
            so=", so it takes no ingest token",
            instead="for a data logger",
        )
    token = generate_token()
    record = IngestToken(
        id=new_id("itk"),
        system_id=system.id,
        name=name,
        token_hash=hash_token(token, secret),
        display=display_form(token),
        created_at=now,
        last_used_at=None,
        revoked_at=None,
    )
    await repository.add(session, record)
    await record_audit(
        session,
        AuditAction.INGEST_TOKEN_CREATED,
        actor=actor,
        account_id=system.account_id,
        subject=record.id,
        ip=ip,
        now=now,
        details={"system_id": system.id, "display": record.display},
    )
    return CreatedToken(TokenView.of(record), token)


async def list_tokens(session: AsyncSession, caller: Caller, system_id: str) -> list[TokenView]:
    """The system's tokens that still work, oldest first."""
    system = owned(await systems_repository.get_record(session, system_id), caller, system_id)
    return [
        TokenView.of(token)
        for token in await repository.list_for_system(session, system.id)
        if token.revoked_at is None
    ]


async def revoke_token(
    session: AsyncSession,
    caller: Caller,
    system_id: str,
    token_id: str,
    now: datetime,
    *,
    actor: Actor,
    ip: str | None,
) -> None:
    """The token stops working with the next request; a second revoke is a 404."""
    system = owned(await systems_repository.get_record(session, system_id), caller, system_id)
    token = await repository.get(session, token_id)
    if token is None or token.system_id != system.id or token.revoked_at is not None:
        raise NotFound(f"No ingest token with id '{excerpt(token_id)}' on this system")
    token.revoked_at = now
    await session.flush()
    await record_audit(
        session,
        AuditAction.INGEST_TOKEN_REVOKED,
        actor=actor,
        account_id=system.account_id,
        subject=token.id,
        ip=ip,
        now=now,
        details={"system_id": system.id, "display": token.display},
    )


def is_ingest_token(authorization: str | None) -> bool:
    """Whether the request's bearer credential is (meant as) an ingest token."""
    if authorization is None:
        return False
    _, _, credential = authorization.strip().partition(" ")
    return credential.strip().startswith(PREFIX)


def token_hash(authorization: str | None, secret: bytes) -> str:
    """The stored hash of the request's token, or Unauthorized saying what is wrong with the
    header or the token's form (checked offline: prefix, length, checksum)."""
    token = bearer_token(authorization, "ingest token ik_…")
    if not token.startswith(PREFIX):
        raise Unauthorized(
            "POST /api/v1/ingest/readings takes an ingest token (ik_…) of the system; with an "
            "API key upload to POST /api/v1/systems/{id}/readings"
        )
    if not well_formed(token):
        if TOKEN_PATTERN.match(token) is not None:
            raise mistyped("ingest token")
        raise Unauthorized(
            "malformed ingest token: tokens look like ik_ followed by 38 letters and digits"
        )
    return hash_token(token, secret)


@dataclass(frozen=True, slots=True)
class FoundCaller:
    caller: IngestCaller
    last_used_at: datetime | None

    def needs_touch(self, now: datetime) -> bool:
        """Whether a request at `now` refreshes the token's `last_used_at` (a minute's
        resolution, as for API keys: an upload every few seconds writes once a minute)."""
        return self.last_used_at is None or now - self.last_used_at >= LAST_USED_RESOLUTION


async def find_caller(session: AsyncSession, hashed: str) -> FoundCaller:
    """The logger behind a request by its token's hash (`token_hash`), or 401."""
    owner = await repository.find_by_hash(session, hashed)
    if owner is None or owner.revoked_at is not None:
        raise Unauthorized("invalid or revoked ingest token")
    if owner.account_disabled:
        raise Unauthorized("this token's account is disabled; its operator can enable it again")
    caller = IngestCaller(
        owner.token_id,
        owner.token_name,
        owner.display,
        owner.system_id,
        owner.account_id,
        owner.environment,
    )
    return FoundCaller(caller, owner.last_used_at)


async def record_use(session: AsyncSession, caller: IngestCaller, now: datetime) -> None:
    """`last_used_at` of a request the token's window allowed (at most once a minute, also
    across workers)."""
    await repository.touch_last_used(session, caller.token_id, now, now - LAST_USED_RESOLUTION)


async def upload(
    session: AsyncSession, caller: IngestCaller, batch: ReadingBatch, now: datetime
) -> UploadResult:
    """The readings upload of the token's system, with the API's rules and events."""

    async def read() -> SystemRecord:
        system = await systems_repository.get_record(session, caller.system_id)
        if system is None:  # deleted since the token was read: the token went with it
            raise Unauthorized("invalid or revoked ingest token")
        return system

    return await upload_to_system(
        session, caller.system_id, caller.account_id, caller.environment, batch, now, read=read
    )
