"""Tables of the audit area: who did what to an account, when, and from where."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base, UtcDateTime


class AuditEvent(Base):
    """One security-relevant action (`audit.AuditAction`). No foreign key: a failed log-in may
    name no account, and the record of an account's deletion outlives the account."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_account_occurred", "account_id", "occurred_at"),
        Index("ix_audit_events_occurred", "occurred_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime())
    action: Mapped[str] = mapped_column(String(40))
    # "operator:<os user>" (the command line), "user:<usr_…>" (the dashboard), "key:<key_…>".
    actor: Mapped[str] = mapped_column(String(200))
    account_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # What the action was done to: a key id, an ingest token id, an e-mail address, …
    subject: Mapped[str | None] = mapped_column(String(320), nullable=True)
    # The client's address (behind trusted proxies, the forwarded one); none from the CLI.
    ip: Mapped[str | None] = mapped_column(String(45), nullable=True)
    details: Mapped[dict[str, str]] = mapped_column(JSON)
