"""SQL of the declarations area. No HTTP, no rules: the service decides, this reads and writes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date
from typing import Any

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.plans import Environment
from solarapi.models.declarations import (
    Declaration,
    DeclarationStatus,
    DeclarationTransition,
    DeclarationType,
)


async def get_declaration(
    session: AsyncSession, account_id: str, environment: Environment, declaration_id: str
) -> Declaration | None:
    return (
        await session.execute(
            select(Declaration)
            .where(
                Declaration.id == declaration_id,
                Declaration.account_id == account_id,
                Declaration.environment == environment,
            )
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


async def get_declaration_by_id(session: AsyncSession, declaration_id: str) -> Declaration | None:
    return (
        await session.execute(
            select(Declaration)
            .where(Declaration.id == declaration_id)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


async def find_overlapping(
    session: AsyncSession,
    *,
    system_id: str,
    declaration_type: DeclarationType,
    period_start: date,
    period_end: date,
    statuses: Collection[DeclarationStatus],
    exclude_id: str | None = None,
) -> Declaration | None:
    """A declaration of the system and type in one of `statuses` sharing at least one day."""
    query = select(Declaration).where(
        Declaration.system_id == system_id,
        Declaration.type == declaration_type,
        Declaration.status.in_(list(statuses)),
        Declaration.period_start <= period_end,
        Declaration.period_end >= period_start,
    )
    if exclude_id is not None:
        query = query.where(Declaration.id != exclude_id)
    return (
        await session.execute(query.order_by(Declaration.period_start).limit(1))
    ).scalar_one_or_none()


async def has_declaration_in(
    session: AsyncSession, system_id: str, statuses: Collection[DeclarationStatus]
) -> bool:
    query = select(
        exists().where(Declaration.system_id == system_id, Declaration.status.in_(list(statuses)))
    )
    return bool((await session.execute(query)).scalar())


async def insert_declaration(session: AsyncSession, declaration: Declaration) -> None:
    session.add(declaration)
    await session.flush()


async def update_if_status(
    session: AsyncSession,
    declaration_id: str,
    expected_status: DeclarationStatus,
    values: dict[str, Any],
) -> bool:
    """Apply `values` only if the row is still in `expected_status`: a compare-and-set that
    lets exactly one of two concurrent transitions win on any database."""
    result = await session.execute(
        update(Declaration)
        .where(Declaration.id == declaration_id, Declaration.status == expected_status)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def delete_if_status(
    session: AsyncSession, declaration_id: str, expected_status: DeclarationStatus
) -> bool:
    result = await session.execute(
        delete(Declaration)
        .where(Declaration.id == declaration_id, Declaration.status == expected_status)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


async def add_transition(session: AsyncSession, transition: DeclarationTransition) -> None:
    session.add(transition)
    await session.flush()


async def list_transitions(
    session: AsyncSession, declaration_id: str
) -> Sequence[DeclarationTransition]:
    return (
        (
            await session.execute(
                select(DeclarationTransition)
                .where(DeclarationTransition.declaration_id == declaration_id)
                .order_by(DeclarationTransition.at, DeclarationTransition.id)
            )
        )
        .scalars()
        .all()
    )


async def list_declarations(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    system_id: str | None,
    status: DeclarationStatus | None,
    declaration_type: DeclarationType | None,
    offset: int,
    limit: int,
) -> tuple[Sequence[Declaration], int]:
    conditions = [Declaration.account_id == account_id, Declaration.environment == environment]
    if system_id is not None:
        conditions.append(Declaration.system_id == system_id)
    if status is not None:
        conditions.append(Declaration.status == status)
    if declaration_type is not None:
        conditions.append(Declaration.type == declaration_type)
    total = (
        await session.execute(select(func.count()).select_from(Declaration).where(*conditions))
    ).scalar_one()
    rows = (
        (
            await session.execute(
                select(Declaration)
                .where(*conditions)
                .order_by(Declaration.created_at.desc(), Declaration.id.desc())
                .offset(offset)
                .limit(limit)
            )
        )
        .scalars()
        .all()
    )
    return rows, int(total)


async def list_by_status(
    session: AsyncSession, status: DeclarationStatus, environment: Environment | None, limit: int
) -> Sequence[Declaration]:
    """For the operator: e.g. the submitted live declarations awaiting a decision."""
    query = select(Declaration).where(Declaration.status == status)
    if environment is not None:
        query = query.where(Declaration.environment == environment)
    return (
        (
            await session.execute(
                query.order_by(Declaration.submitted_at, Declaration.id).limit(limit)
            )
        )
        .scalars()
        .all()
    )
