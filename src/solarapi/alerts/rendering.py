"""The alert as read (a frozen record) and its one JSON rendering, used by the endpoints,
the `alert.opened` / `alert.resolved` events and the dashboard alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.alerts import AlertStatus, AlertType


@dataclass(frozen=True, slots=True)
class AlertRecord:
    id: str
    account_id: str
    environment: Environment
    system_id: str
    type: AlertType
    status: AlertStatus
    opened_at: datetime
    resolved_at: datetime | None
    evidence: Mapping[str, Any]


def render(alert: AlertRecord) -> dict[str, Any]:
    """The contract's alert object (documented by `alerts.schemas.AlertOut`)."""
    return {
        "id": alert.id,
        "system_id": alert.system_id,
        "type": alert.type,
        "status": alert.status,
        "opened_at": format_timestamp(alert.opened_at),
        "resolved_at": format_optional(alert.resolved_at),
        "environment": alert.environment,
        "evidence": dict(alert.evidence),
    }
