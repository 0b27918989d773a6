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
)
EVENT_TYPE_SET: frozenset[str] = frozenset(EVENT_TYPES)

# Events are kept this long (contract: "kept 30 days"); older ones are invisible at once and
# deleted by the periodic clean-up.
EVENT_RETENTION = timedelta(days=30)


def describe_allowed() -> str:
    return ", ".join(EVENT_TYPES)
