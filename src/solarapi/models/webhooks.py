"""Tables of the webhooks area: the event outbox, webhook endpoints, their delivery attempts,
and the Idempotency-Key records of POST requests."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class EventType(enum.StrEnum):
    """The event types of the contract, in its order."""

    REPORT_COMPLETED = "report.completed"
    REPORT_FAILED = "report.failed"
    DECLARATION_SUBMITTED = "declaration.submitted"
    DECLARATION_APPROVED = "declaration.approved"
    DECLARATION_REJECTED = "declaration.rejected"
    DECLARATION_WITHDRAWN = "declaration.withdrawn"
    SYSTEM_CREATED = "system.created"
    SYSTEM_UPDATED = "system.updated"
    SYSTEM_DELETED = "system.deleted"
    READINGS_UPLOADED = "readings.uploaded"
    ALERT_OPENED = "alert.opened"
    ALERT_RESOLVED = "alert.resolved"


class Event(Base):
    """One state change as clients see it, written in the same transaction as the change."""

    __tablename__ = "events"
    __table_args__ = (
        # GET /events: one account's environment, newest first (created_at, id descending).
        Index("ix_events_account_env_created", "account_id", "environment", "created_at", "id"),
        # The retention clean-up deletes by age across all accounts.
        Index("ix_events_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    type: Mapped[EventType] = mapped_column(StrEnumType(EventType, 40))
    # The changed object as the API showed it (a JSON object).
    data: Mapped[dict[str, object]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class WebhookEndpoint(Base):
    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        Index("ix_webhook_endpoints_account_env", "account_id", "environment", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    url: Mapped[str] = mapped_column(String(2048))
    description: Mapped[str | None] = mapped_column(String(500), nullable=True)
    # The subscribed event types, a JSON list of strings.
    events: Mapped[list[str]] = mapped_column(JSON)
    enabled: Mapped[bool] = mapped_column(Boolean)
    disabled_reason: Mapped[str | None] = mapped_column(String(500), nullable=True)
    # The signing secret is never stored: it is HMAC(server secret, salt), so a copy of the
    # database alone does not let anyone forge deliveries. Rotation draws a new salt and keeps
    # the previous one until `previous_salt_expires_at`.
    secret_salt: Mapped[str] = mapped_column(String(64))
    previous_secret_salt: Mapped[str | None] = mapped_column(String(64), nullable=True)
    previous_salt_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # The circuit breaker: attempts in a row that got no answer in time, and until when
    # deliveries wait instead of trying (`webhooks.delivery`).
    consecutive_timeouts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    circuit_open_until: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class WebhookDelivery(Base):
    """One attempt to deliver one event to one endpoint."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_endpoint_attempted", "endpoint_id", "attempted_at", "id"),
        Index("ix_webhook_deliveries_event", "event_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    event_type: Mapped[EventType] = mapped_column(StrEnumType(EventType, 40))
    attempt: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # Null when no HTTP response arrived (timeout, refused connection, forbidden address).
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    succeeded: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(String(500), nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class IdempotencyRecord(Base):
    """An Idempotency-Key as used by one API key: taken before the request runs (the unique
    constraint is the lock), completed with the response to replay."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("api_key_id", "idempotency_key"),
        UniqueConstraint("ingest_token_id", "idempotency_key"),
        CheckConstraint("(api_key_id IS NULL) <> (ingest_token_id IS NULL)", name="one_holder"),
        Index("ix_idempotency_keys_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # Whose key it is: an API key's, or an ingest token's (a data logger's uploads).
    api_key_id: Mapped[str | None] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=True
    )
    ingest_token_id: Mapped[str | None] = mapped_column(
        ForeignKey("ingest_tokens.id", ondelete="CASCADE"), nullable=True
    )
    idempotency_key: Mapped[str] = mapped_column(String(255))
    # SHA-256 of method, path with query and body: what "the same request" means.
    request_hash: Mapped[str] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(10))
    path: Mapped[str] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # [[name, value], ...] as latin-1 strings, in the order the app sent them.
    response_headers: Mapped[list[list[str]] | None] = mapped_column(JSON, nullable=True)
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


__all__ = ["Event", "IdempotencyRecord", "WebhookDelivery", "WebhookEndpoint"]
