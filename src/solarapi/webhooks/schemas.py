"""Request and response bodies of the webhooks endpoints."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from solarapi.events.types import EVENT_TYPE_SET, EVENT_TYPES, describe_allowed
from solarapi.kit.openapi_fields import enum_schema
from solarapi.kit.text import excerpt

MAX_DESCRIPTION = 500


def _known_event_type(value: str) -> str:
    if value not in EVENT_TYPE_SET:
        raise ValueError(f"unknown event type '{excerpt(value)}'; one of {describe_allowed()}")
    return value


EventType = Annotated[str, AfterValidator(_known_event_type), enum_schema(EVENT_TYPES)]
EventList = Annotated[
    list[EventType],
    Field(min_length=1, max_length=len(EVENT_TYPE_SET) * 2, description="Event types to send"),
]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Annotated[str, Field(description="https URL of the receiver")]
    events: EventList
    description: Annotated[str | None, Field(max_length=MAX_DESCRIPTION)] = None


class WebhookUpdate(BaseModel):
    """Every field optional; only the fields sent change. `status: enabled` re-enables an
    endpoint that a 410 response disabled."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    events: EventList | None = None
    description: Annotated[str | None, Field(max_length=MAX_DESCRIPTION)] = None
    status: Literal["enabled", "disabled"] | None = None


class WebhookOut(BaseModel):
    id: str
    url: str
    description: str | None
    events: list[str]
    status: Literal["enabled", "disabled"]
    disabled_reason: str | None
    environment: Literal["live", "test"]
    previous_secret_expires_at: str | None = Field(
        description="While set, deliveries are also signed with the secret replaced by the "
        "last rotation, until this time"
    )
    created_at: str
    updated_at: str


class WebhookWithSecret(WebhookOut):
    # Not required: a replay of the request (same Idempotency-Key) answers without it.
    secret: str | None = Field(
        default=None,
        description="The signing secret (whsec_…); shown only in this response. Absent from "
        "a replay of the same request (Idempotency-Key): secrets are never stored for one",
    )


class DeliveryOut(BaseModel):
    id: str
    event_id: str
    event_type: str
    attempt: int = Field(description="1 for the first try; up to 10")
    attempted_at: str
    status_code: int | None = Field(description="The receiver's HTTP status; null if none")
    latency_ms: int | None
    success: bool
    error: str | None
    next_attempt_at: str | None = Field(description="When the next retry is due, if any")
