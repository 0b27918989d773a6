"""Tables of the alerts area: what the monitoring rules found on a system."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class AlertType(enum.StrEnum):
    OFFLINE = "system.offline"
    ZERO_PRODUCTION = "system.zero_production"
    UNDERPERFORMING = "system.underperforming"


class AlertStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


ALERT_TYPES = tuple(member.value for member in AlertType)
ALERT_STATUSES = tuple(member.value for member in AlertStatus)

_OPEN = text("status = 'open'")


class Alert(Base):
    """One episode of a rule holding on a system: opened when it starts to hold, resolved when
    it stops. A system has at most one open alert per type, kept by a partial unique index on
    both databases, so two evaluations racing cannot open two."""

    __tablename__ = "alerts"
    __table_args__ = (
        # GET /alerts: one account's environment, newest first (opened_at, id descending).
        Index("ix_alerts_account_env_opened", "account_id", "environment", "opened_at", "id"),
        Index(
            "uq_alerts_open_system_type",
            "system_id",
            "type",
            unique=True,
            sqlite_where=_OPEN,
            postgresql_where=_OPEN,
        ),
        # The system page's history and the evaluation's look-up of a system's alerts.
        Index("ix_alerts_system_opened", "system_id", "opened_at"),
        CheckConstraint("environment IN ('live', 'test')", name="environment"),
        CheckConstraint("status IN ('open', 'resolved')", name="status"),
        CheckConstraint(
            "type IN ('system.offline', 'system.zero_production', 'system.underperforming')",
            name="type",
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    system_id: Mapped[str] = mapped_column(ForeignKey("systems.id", ondelete="CASCADE"))
    type: Mapped[AlertType] = mapped_column(StrEnumType(AlertType, 40))
    status: Mapped[AlertStatus] = mapped_column(StrEnumType(AlertStatus, 10))
    opened_at: Mapped[datetime] = mapped_column(UtcDateTime())
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # The numbers that decided it (and, once resolved, those that resolved it).
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
