"""The event types of the contract: the one list that endpoints and filters check against."""

from __future__ import annotations

from datetime import timedelta

EVENT_TYPES: tuple[str, ...] = (
    "report.completed",
    "report.failed",
    "declaration.submitted",
    "declaration.approved",
    "declaration.rejected",
    "declaration.withdrawn",
    "system.created",
    "system.updated",
    "system.deleted",
    "readings.uploaded",
    "alert.opened",
    "alert.resolved",
)
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


def describe_allowed() -> str:
    return ", ".join(EVENT_TYPES)
