"""Authenticating a Bearer key, and issuing and revoking keys."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth import repository
from solarapi.auth.keys import KEY_PATTERN, NewKey, generate_key, hash_key, parse_key
from solarapi.auth.principal import Principal
from solarapi.errors import NotFound, Unauthorized, ValidationFailed
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.text import excerpt
from solarapi.models import ApiKey
from solarapi.sandbox.provision import ensure_sandbox

# last_used_at is refreshed at most this often per key, so the hot path does not write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def bearer_token(authorization: str | None, credential: str = "API key") -> str:
    """The key from an `Authorization: Bearer …` header, or Unauthorized saying what is wrong
    (naming the `credential` the endpoint takes)."""
    if authorization is None or not authorization.strip():
        raise Unauthorized(
            f"missing Authorization header; send 'Authorization: Bearer <{credential}>'"
        )
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized(f"malformed Authorization header; expected 'Bearer <{credential}>'")
    return token.strip()


def mistyped(credential: str) -> Unauthorized:
    """A key or token of the right shape with a wrong checksum: a typo or a truncated copy,
    not a wrong format — said so, not "looks like …"."""
    return Unauthorized(
        f"malformed {credential}: its last 6 characters (a checksum) do not match the rest; "
        f"the {credential} was mistyped or changed while copying"
    )


def key_hash(authorization: str | None, secret: bytes) -> str:
    """The stored hash of the request's key, or Unauthorized saying what is wrong with the
    header or the key's form (checked offline: prefix, length, checksum)."""
    token = bearer_token(authorization)
    if parse_key(token) is None:
        if KEY_PATTERN.match(token) is not None:
            raise mistyped("key")
        raise Unauthorized(
            "malformed key: API keys look like pk_live_… or pk_test_… followed by 38 letters "
            "and digits"
        )
    return hash_key(token, secret)


def needs_touch(principal: Principal, now: datetime) -> bool:
    """Whether a request at `now` refreshes the key's `last_used_at`."""
    return _stale(principal.key_last_used_at, now)


def _stale(last_used_at: datetime | None, now: datetime) -> bool:
    return last_used_at is None or now - last_used_at >= LAST_USED_RESOLUTION


@dataclass(frozen=True, slots=True)
class Authenticated:
    principal: Principal
    wrote: bool  # `last_used_at` or the sandbox's first provisioning: the caller commits


async def authenticate(session: AsyncSession, hashed: str, now: datetime) -> Authenticated:
    """The caller of a request by its key's hash (`key_hash`). Writes `last_used_at` at most
    once a minute per key, and provisions the sandbox on a test key's first use."""
    record = await repository.find_key_by_hash(session, hashed)
    if record is None or record.revoked_at is not None:
        raise Unauthorized("invalid or revoked key")
    if record.account_disabled:
        raise Unauthorized("this key's account is disabled; its operator can enable it again")
    last_used_at = record.last_used_at
    wrote = False
    if _stale(last_used_at, now):
        wrote = True  # the UPDATE ran (and on SQLite began a write) even if it changed nothing
        if await repository.touch_last_used(
            session, record.key_id, now, now - LAST_USED_RESOLUTION
        ):
            last_used_at = now
    if record.environment == Environment.TEST and not record.sandbox_provisioned:
        wrote = True
        await ensure_sandbox(session, record.account_id, now)
    principal = Principal(
        account_id=record.account_id,
        account_name=record.account_name,
        plan=Plan(record.plan),
        environment=Environment(record.environment),
        key_id=record.key_id,
        key_name=record.key_name,
        key_display=record.display,
        key_created_at=record.created_at,
        key_last_used_at=last_used_at,
    )
    return Authenticated(principal, wrote)


def validate_key_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise ValidationFailed("key name must be 1–100 characters")
    return name


async def create_key(
    session: AsyncSession,
    *,
    account_id: str,
    name: str,
    environment: Environment,
    secret: bytes,
    now: datetime,
) -> tuple[ApiKey, NewKey]:
    """Issue a key. The returned NewKey is the only time the full key exists outside the client."""
    new = generate_key(environment)
    record = ApiKey(
        id=new_id("key"),
        account_id=account_id,
        name=validate_key_name(name),
        environment=environment,
        key_hash=hash_key(new.key, secret),
        display=new.display,
        created_at=now,
        last_used_at=None,
        revoked_at=None,
    )
    await repository.add_key(session, record)
    return record, new


async def revoke_key(
    session: AsyncSession, *, key_id: str, now: datetime, account_id: str | None = None
) -> ApiKey:
    key = await repository.get_key(session, key_id)
    if key is None or (account_id is not None and key.account_id != account_id):
        raise NotFound(f"No API key with id {excerpt(key_id)}")
    if key.revoked_at is None:
        key.revoked_at = now
        await session.flush()
    return key
