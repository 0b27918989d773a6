"""The event types of the contract: the one list that endpoints and filters check against."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from solarapi.kit.plans import Environment
from solarapi.models.webhooks import EventType

EVENT_TYPES: tuple[str, ...] = tuple(member.value for member in EventType)
EVENT_TYPE_SET: frozenset[str] = frozenset(EVENT_TYPES)

# Events are kept this long (contract: "kept 30 days"); older ones are invisible at once and
# deleted by the periodic clean-up.
EVENT_RETENTION = timedelta(days=30)

# Each webhook delivery attempt is one job of this kind: queued by `record_event` with the
# event (the outbox), run by `webhooks.delivery.deliver`.
DELIVERY_JOB_KIND = "webhook.deliver"
# Infrastructure failures of one attempt (our database, not the receiver) are retried by the
# job runner this many times before the attempt is given up.
DELIVERY_JOB_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """An event as `record_event` would add it, for a caller that writes it in one statement
    with the change it describes (the readings upload, `readings.store`): the row's values,
    the data as JSON text, and ids for the first delivery job of each enabled endpoint
    subscribed to its type — a job of `delivery_kind` whose payload is `{"event_id",
    "endpoint_id", "attempt": 1}`, as `schedule_deliveries` queues it. An account with more
    subscribed endpoints than `delivery_ids` must be served by `record_event` instead."""

    id: str
    account_id: str
    environment: Environment
    type: EventType
    data: str
    created_at: datetime
    delivery_ids: tuple[str, ...]
    delivery_kind: str = DELIVERY_JOB_KIND
    delivery_max_attempts: int = DELIVERY_JOB_MAX_ATTEMPTS


def describe_allowed() -> str:
    return ", ".join(EVENT_TYPES)
