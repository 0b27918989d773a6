"""Recording and listing events. Call `record_event` inside the same session (transaction) as
the change it describes, so an event exists if and only if its change committed (the outbox
pattern); the webhook deliveries it schedules are jobs in that same transaction too, run by
`webhooks.delivery` (webhooks depends on events, not the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import Enum

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ValidationFailed
from solarapi.events import repository
from solarapi.events.types import (
    DELIVERY_JOB_KIND,
    DELIVERY_JOB_MAX_ATTEMPTS,
    EVENT_RETENTION,
    EVENT_TYPE_SET,
    PreparedEvent,
    describe_allowed,
)
from solarapi.jobs.queue import enqueue
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.plans import Environment
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_timestamp, utcnow
from solarapi.models.webhooks import Event, EventType


async def record_event(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    event_type: EventType,
    data: dict[str, object],
) -> str:
    """Add an event (e.g. "system.created") with `data` = the object as the API shows it, and
    schedule its webhook deliveries. Only flushes: the caller's transaction decides.

    Returns the event id (`evt_…`)."""
    _check_type(event_type)
    event = Event(
        id=new_id("evt"),
        account_id=account_id,
        environment=environment,
        type=event_type,
        data=_plain_json(data),
        created_at=utcnow(),
    )
    await repository.add(session, event)
    await schedule_deliveries(session, event)
    return event.id


# How many subscribed endpoints a prepared event has delivery job ids for.
PREPARED_DELIVERIES = 8


def prepare_event(
    *,
    account_id: str,
    environment: Environment,
    event_type: EventType,
    data: dict[str, object],
    now: datetime,
) -> PreparedEvent:
    """The values of an event `record_event` would record (see `PreparedEvent`)."""
    _check_type(event_type)
    return PreparedEvent(
        id=new_id("evt"),
        account_id=account_id,
        environment=environment,
        type=event_type,
        data=orjson.dumps(_plain_json(data)).decode(),
        created_at=now,
        delivery_ids=tuple(new_id("job") for _ in range(PREPARED_DELIVERIES)),
    )


def _check_type(event_type: str) -> None:
    if event_type not in EVENT_TYPE_SET:
        # A programming error in the calling area, not a client error: fail loudly.
        raise ValueError(f"unknown event type '{excerpt(event_type)}'; known: {describe_allowed()}")


async def schedule_deliveries(session: AsyncSession, event: Event) -> list[str]:
    """Queue the first delivery attempt for every enabled endpoint subscribed to the event's
    type, in the caller's transaction. Returns the job ids. (`webhooks.delivery` runs them.)"""
    endpoints = await repository.enabled_endpoints(
        session, account_id=event.account_id, environment=event.environment
    )
    job_ids: list[str] = []
    for endpoint in endpoints:
        if event.type in endpoint.events:
            job_ids.append(
                await enqueue(
                    session,
                    DELIVERY_JOB_KIND,
                    {"event_id": event.id, "endpoint_id": endpoint.id, "attempt": 1},
                    max_attempts=DELIVERY_JOB_MAX_ATTEMPTS,
                    account_id=event.account_id,
                )
            )
    return job_ids


def _plain_json(data: dict[str, object]) -> dict[str, object]:
    """`data` as plain JSON values, with timestamps in the API's own `…Z` form, so the stored
    event is exactly what a client would have seen (and fails here, not at commit, if not
    serialisable)."""

    def default(value: object) -> object:
        if isinstance(value, datetime):
            return format_timestamp(value)
        if isinstance(value, Decimal):
            return float(value)
        if isinstance(value, Enum):
            return value.value
        raise TypeError(f"event data holds a {type(value).__name__}, which is not JSON")

    encoded = orjson.dumps(data, default=default, option=orjson.OPT_PASSTHROUGH_DATETIME)
    decoded: dict[str, object] = orjson.loads(encoded)
    return decoded


@dataclass(frozen=True, slots=True)
class EventView:
    """An event as the API and webhook bodies show it: a frozen value, rendered once
    (`render`, documented by the router's `EventOut`)."""

    id: str
    type: str
    created_at: datetime
    environment: Environment
    data: dict[str, object]  # the object as the API showed it when the event happened: JSON

    @classmethod
    def of(cls, event: Event) -> EventView:
        return cls(
            id=event.id,
            type=event.type,
            created_at=event.created_at,
            environment=event.environment,
            data=event.data,
        )

    def render(self) -> dict[str, object]:
        return {
            "id": self.id,
            "type": self.type,
            "created_at": format_timestamp(self.created_at),
            "environment": self.environment,
            "data": self.data,
        }


def parse_type_filter(raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in EVENT_TYPE_SET:
        raise ValidationFailed(f"type must be one of {describe_allowed()}; got '{excerpt(raw)}'")
    return raw


async def list_events(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    event_type: str | None,
    page: PageParams,
    now: datetime,
) -> tuple[list[EventView], int]:
    # Expired events are hidden at once, whenever the clean-up last ran.
    rows, total = await repository.list_page(
        session,
        account_id=account_id,
        environment=environment,
        event_type=event_type,
        since=now - EVENT_RETENTION,
        offset=page.offset,
        limit=page.limit,
    )
    return [EventView.of(row) for row in rows], total


async def purge_expired(session: AsyncSession, now: datetime) -> int:
    """Delete events past the retention period; returns how many."""
    return await repository.delete_older_than(session, now - EVENT_RETENTION)
