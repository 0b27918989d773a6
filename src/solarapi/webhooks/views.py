"""Webhook endpoints and their delivery attempts as the API shows them: frozen typed values
the service returns (`WebhookView`, `IssuedSecret`, `DeliveryView`), each rendered to its
JSON shape in one place (`render`; documented by `schemas.WebhookOut`,
`schemas.WebhookWithSecret` and `schemas.DeliveryOut`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.webhooks import WebhookDelivery, WebhookEndpoint


@dataclass(frozen=True, slots=True)
class WebhookView:
    id: str
    url: str
    description: str | None
    events: tuple[str, ...]
    enabled: bool
    disabled_reason: str | None
    environment: Environment
    previous_secret_expires_at: datetime | None  # None once the rotation overlap is over
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, endpoint: WebhookEndpoint, now: datetime) -> WebhookView:
        overlap_until = endpoint.previous_salt_expires_at
        if overlap_until is not None and overlap_until <= now:
            overlap_until = None
        return cls(
            id=endpoint.id,
            url=endpoint.url,
            description=endpoint.description,
            events=tuple(endpoint.events),
            enabled=endpoint.enabled,
            disabled_reason=endpoint.disabled_reason,
            environment=endpoint.environment,
            previous_secret_expires_at=overlap_until,
            created_at=endpoint.created_at,
            updated_at=endpoint.updated_at,
        )

    def render(self) -> dict[str, object]:
        return {
            "id": self.id,
            "url": self.url,
            "description": self.description,
            "events": list(self.events),
            "status": "enabled" if self.enabled else "disabled",
            "disabled_reason": self.disabled_reason,
            "environment": self.environment,
            "previous_secret_expires_at": format_optional(self.previous_secret_expires_at),
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class IssuedSecret:
    """An endpoint with the signing secret just drawn for it (creation, rotation): the one
    answer that shows the secret."""

    endpoint: WebhookView
    secret: str

    def render(self) -> dict[str, object]:
        return {**self.endpoint.render(), "secret": self.secret}


@dataclass(frozen=True, slots=True)
class DeliveryView:
    id: str
    event_id: str
    event_type: str
    attempt: int
    attempted_at: datetime
    status_code: int | None
    latency_ms: int | None
    succeeded: bool
    error: str | None
    next_attempt_at: datetime | None

    @classmethod
    def of(cls, row: WebhookDelivery) -> DeliveryView:
        return cls(
            id=row.id,
            event_id=row.event_id,
            event_type=row.event_type,
            attempt=row.attempt,
            attempted_at=row.attempted_at,
            status_code=row.status_code,
            latency_ms=row.latency_ms,
            succeeded=row.succeeded,
            error=row.error,
            next_attempt_at=row.next_attempt_at,
        )

    def without_retry(self) -> DeliveryView:
        """This attempt with no retry due (its endpoint is disabled: none runs)."""
        if self.next_attempt_at is None:
            return self
        return dataclasses.replace(self, next_attempt_at=None)

    def render(self) -> dict[str, object]:
        return {
            "id": self.id,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "attempt": self.attempt,
            "attempted_at": format_timestamp(self.attempted_at),
            "status_code": self.status_code,
            "latency_ms": self.latency_ms,
            "success": self.succeeded,
            "error": self.error,
            "next_attempt_at": format_optional(self.next_attempt_at),
        }
