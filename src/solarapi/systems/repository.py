"""SQL for systems."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery
from solarapi.models.readings import Reading, ReadingDay, ReadingHour
from solarapi.models.systems import System


async def get(session: AsyncSession, system_id: str, *, for_update: bool = False) -> System | None:
    statement = select(System).where(System.id == system_id)
    if for_update:
        # Serialises concurrent uploads to one system on PostgreSQL (SQLite has one writer).
        statement = statement.with_for_update()
    return await session.scalar(statement)


# Every column of a system, in table order: what a snapshot is made of.
SYSTEM_COLUMNS = tuple(System.__table__.columns)
_KEYS = tuple(column.key for column in SYSTEM_COLUMNS)
_MANAGER = System.__mapper__.class_manager
_BY_ID = DriverQuery(select(*SYSTEM_COLUMNS).where(System.id == bindparam("id")))


async def snapshot(session: AsyncSession, system_id: str) -> System | None:
    """The system as a detached object (not in the session, so never written back), read in
    one hand-over to the driver: for requests that only read it."""
    row = await _BY_ID.first(session, {"id": system_id})
    return None if row is None else detached(row)


def detached(values: Sequence[Any]) -> System:
    """A System from the values of SYSTEM_COLUMNS (converted as the ORM converts them),
    outside any session.

    Filled the way SQLAlchemy's loader fills a row's object (values straight into the
    instance's dict), not through the constructor, whose per-attribute change events cost
    more here than the query (≈80 of ≈210 µs per lookup on PostgreSQL)."""
    system: System = _MANAGER.new_instance()
    system.__dict__.update(zip(_KEYS, values, strict=True))
    return system


async def list_page(
    session: AsyncSession,
    *,
    account_id: str,
    environment: str,
    status: str | None,
    market_zone: str | None,
    offset: int,
    limit: int,
) -> tuple[Sequence[System], int]:
    conditions = [System.account_id == account_id, System.environment == environment]
    if status is not None:
        conditions.append(System.status == status)
    if market_zone is not None:
        conditions.append(System.market_zone == market_zone)
    total = await session.scalar(select(func.count()).select_from(System).where(*conditions))
    rows = await session.scalars(
        select(System)
        .where(*conditions)
        .order_by(System.created_at, System.id)
        .offset(offset)
        .limit(limit)
    )
    return rows.all(), int(total or 0)


async def list_for_account(
    session: AsyncSession, account_id: str, environment: str
) -> Sequence[System]:
    rows = await session.scalars(
        select(System)
        .where(System.account_id == account_id, System.environment == environment)
        .order_by(System.created_at, System.id)
    )
    return rows.all()


async def add(session: AsyncSession, system: System) -> None:
    session.add(system)
    await session.flush()


async def delete_system(session: AsyncSession, system: System) -> None:
    # Explicit deletes instead of relying on ON DELETE CASCADE alone: the ORM session would
    # otherwise not know, and SQLite enforces foreign keys only with a per-connection pragma.
    for table in (Reading, ReadingHour, ReadingDay):
        await session.execute(delete(table).where(table.system_id == system.id))
    await session.delete(system)
    await session.flush()
