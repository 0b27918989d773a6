"""The one tenancy check: a system is the caller's, in the caller's environment, or it is a
404 (never 403, so ids of other tenants cannot be probed)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import NotFound
from solarapi.kit.text import excerpt
from solarapi.models.systems import System
from solarapi.systems import repository


async def get_system(
    session: AsyncSession, principal: Principal, system_id: str, *, for_update: bool = False
) -> System:
    """The caller's system in the caller's environment; anything else is 404 (never 403,
    so ids of other tenants cannot be probed)."""
    return owned(
        await repository.get(session, system_id, for_update=for_update), principal, system_id
    )


async def read_system(session: AsyncSession, principal: Principal, system_id: str) -> System:
    """The caller's system for a request that only reads it: a snapshot outside the session
    (changing it changes nothing), read without the ORM — every readings query starts here."""
    return owned(await repository.snapshot(session, system_id), principal, system_id)


def owned(system: System | None, principal: Principal, system_id: str) -> System:
    """`system` if it is the caller's, in the caller's environment; else 404 (never 403, so
    ids of other tenants cannot be probed)."""
    if (
        system is None
        or system.account_id != principal.account_id
        or system.environment != principal.environment.value
    ):
        raise NotFound(f"No system with id '{excerpt(system_id)}'")
    return system
