"""SQL for webhook endpoints and their delivery attempts."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.plans import Environment
from solarapi.models.webhooks import WebhookDelivery, WebhookEndpoint


async def add(session: AsyncSession, *objects: WebhookEndpoint | WebhookDelivery) -> None:
    session.add_all(objects)
    await session.flush()


async def get_endpoint(
    session: AsyncSession, endpoint_id: str, *, account_id: str, environment: Environment
) -> WebhookEndpoint | None:
    return await session.scalar(
        select(WebhookEndpoint).where(
            WebhookEndpoint.id == endpoint_id,
            WebhookEndpoint.account_id == account_id,
            WebhookEndpoint.environment == environment,
        )
    )


async def get_endpoint_by_id(session: AsyncSession, endpoint_id: str) -> WebhookEndpoint | None:
    """For the delivery job, which acts for whichever account owns the endpoint."""
    return await session.get(WebhookEndpoint, endpoint_id)


async def count_endpoints(
    session: AsyncSession, *, account_id: str, environment: Environment
) -> int:
    total = await session.scalar(
        select(func.count())
        .select_from(WebhookEndpoint)
        .where(
            WebhookEndpoint.account_id == account_id,
            WebhookEndpoint.environment == environment,
        )
    )
    return int(total or 0)


async def list_endpoints(
    session: AsyncSession, *, account_id: str, environment: Environment, offset: int, limit: int
) -> list[WebhookEndpoint]:
    rows = await session.scalars(
        select(WebhookEndpoint)
        .where(
            WebhookEndpoint.account_id == account_id,
            WebhookEndpoint.environment == environment,
        )
        .order_by(WebhookEndpoint.created_at, WebhookEndpoint.id)
        .offset(offset)
        .limit(limit)
    )
    return list(rows)


async def delete_endpoint(session: AsyncSession, endpoint: WebhookEndpoint) -> None:
    await session.delete(endpoint)
    await session.flush()


async def list_deliveries(
    session: AsyncSession, endpoint_id: str, *, offset: int, limit: int
) -> tuple[list[WebhookDelivery], int]:
    condition = WebhookDelivery.endpoint_id == endpoint_id
    total = await session.scalar(select(func.count()).select_from(WebhookDelivery).where(condition))
    rows = await session.scalars(
        select(WebhookDelivery)
        .where(condition)
        .order_by(WebhookDelivery.attempted_at.desc(), WebhookDelivery.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return list(rows), int(total or 0)


async def attempt_recorded(
    session: AsyncSession, endpoint_id: str, event_id: str, attempt: int
) -> bool:
    row = await session.execute(
        select(WebhookDelivery.id)
        .where(
            WebhookDelivery.endpoint_id == endpoint_id,
            WebhookDelivery.event_id == event_id,
            WebhookDelivery.attempt == attempt,
        )
        .limit(1)
    )
    return row.first() is not None


async def circuit_state(session: AsyncSession, endpoint_id: str) -> tuple[int, datetime | None]:
    """(timeouts in a row, circuit open until) of an endpoint, read afresh."""
    row = (
        await session.execute(
            select(WebhookEndpoint.consecutive_timeouts, WebhookEndpoint.circuit_open_until).where(
                WebhookEndpoint.id == endpoint_id
            )
        )
    ).first()
    return (0, None) if row is None else (int(row[0]), row[1])


async def take_probe(
    session: AsyncSession, endpoint_id: str, seen: datetime | None, until: datetime
) -> bool:
    """Half-open: the one delivery that may try the endpoint again is the one whose
    compare-and-set of `circuit_open_until` (from `seen` to `until`) wins."""
    opened = (
        WebhookEndpoint.circuit_open_until.is_(None)
        if seen is None
        else WebhookEndpoint.circuit_open_until == seen
    )
    result = await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, opened)
        .values(circuit_open_until=until)
        .returning(WebhookEndpoint.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def count_timeout(session: AsyncSession, endpoint_id: str) -> int:
    """One more attempt in a row without an answer in time; returns how many now."""
    result = await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(consecutive_timeouts=WebhookEndpoint.consecutive_timeouts + 1)
        .returning(WebhookEndpoint.consecutive_timeouts)
        .execution_options(synchronize_session=False)
    )
    row = result.first()
    return 0 if row is None else int(row[0])


async def open_circuit(session: AsyncSession, endpoint_id: str, until: datetime) -> None:
    await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(circuit_open_until=until)
        .execution_options(synchronize_session=False)
    )


async def close_circuit(session: AsyncSession, endpoint_id: str) -> None:
    """The endpoint answered: its count of timeouts starts again."""
    await session.execute(
        update(WebhookEndpoint)
        .where(
            WebhookEndpoint.id == endpoint_id,
            (WebhookEndpoint.consecutive_timeouts > 0)
            | WebhookEndpoint.circuit_open_until.is_not(None),
        )
        .values(consecutive_timeouts=0, circuit_open_until=None)
        .execution_options(synchronize_session=False)
    )
