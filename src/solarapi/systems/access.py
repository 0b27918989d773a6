"""The one tenancy check: a system is the caller's, in the caller's environment, or it is a
404 (never 403, so ids of other tenants cannot be probed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.errors import NotFound
from solarapi.kit.plans import Environment
from solarapi.kit.text import excerpt
from solarapi.models.systems import System, SystemRecord
from solarapi.systems import repository

AnySystem = TypeVar("AnySystem", System, SystemRecord, repository.SystemHead)


def tenant_system(
    system: AnySystem | None,
    system_id: str,
    *,
    account_id: str,
    environment: Environment | None,
) -> AnySystem:
    """`system` if it belongs to `account_id` and `environment` (None: either environment,
    as a signed-in person sees both); else 404 with the contract's one message."""
    if (
        system is None
        or system.account_id != account_id
        or (environment is not None and system.environment != environment)
    ):
        raise NotFound(f"No system with id '{excerpt(system_id)}'")
    return system


def owned(system: AnySystem | None, principal: Caller, system_id: str) -> AnySystem:
    """`system` if it is the API caller's, in the key's environment; else 404."""
    return tenant_system(
        system,
        system_id,
        account_id=principal.account_id,
        environment=principal.environment,
    )


async def get_system(session: AsyncSession, principal: Caller, system_id: str) -> System:
    """The caller's system as an ORM object, for a request that changes it."""
    return owned(await repository.get(session, system_id), principal, system_id)


async def read_system(session: AsyncSession, principal: Caller, system_id: str) -> SystemRecord:
    """The caller's system for a request that only reads it: a frozen record, read without
    the ORM — every readings query starts here."""
    return owned(await repository.get_record(session, system_id), principal, system_id)


async def find_systems(
    session: AsyncSession, principal: Caller, system_ids: Sequence[str]
) -> dict[str, System]:
    """Those of `system_ids` that are the caller's, in the caller's environment, by id: one
    query for all of them (a report's systems), never one per id."""
    return {
        system.id: system
        for system in await repository.get_many(session, system_ids)
        if system.account_id == principal.account_id and system.environment == principal.environment
    }


async def get_systems(
    session: AsyncSession, principal: Caller, system_ids: Sequence[str]
) -> list[System]:
    """The caller's systems `system_ids`, in that order; 404 naming the first that is not
    theirs (the message of `owned`)."""
    found = await find_systems(session, principal, system_ids)
    return [owned(found.get(system_id), principal, system_id) for system_id in system_ids]
