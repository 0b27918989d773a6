"""SQL for webhook endpoints and their delivery attempts."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.models.webhooks import WebhookDelivery, WebhookEndpoint


async def add(session: AsyncSession, *objects: WebhookEndpoint | WebhookDelivery) -> None:
    session.add_all(objects)
    await session.flush()


async def get_endpoint(
    session: AsyncSession, endpoint_id: str, *, account_id: str, environment: str
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


async def count_endpoints(session: AsyncSession, *, account_id: str, environment: str) -> int:
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
    session: AsyncSession, *, account_id: str, environment: str, offset: int, limit: int
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
