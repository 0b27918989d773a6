"""Tables of the declarations area: the declarations and their audit trail."""

from __future__ import annotations

import enum
from datetime import date, datetime

from sqlalchemy import (
    CheckConstraint,
    Date,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class DeclarationStatus(enum.StrEnum):
    DRAFT = "draft"
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"


class DeclarationType(enum.StrEnum):
    GUARANTEE_OF_ORIGIN = "guarantee_of_origin"
    PRODUCTION_SUBSIDY = "production_subsidy"
    FEED_IN = "feed_in"


class DeclarationAction(enum.StrEnum):
    """What was done to a declaration (its history's `action`; the state machine's rows)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    SUBMIT = "submit"
    WITHDRAW = "withdraw"
    APPROVE = "approve"
    REJECT = "reject"


class Declaration(Base):
    __tablename__ = "declarations"
    __table_args__ = (
        # The list endpoint: one account's environment, newest first.
        Index("ix_declarations_account_env_created", "account_id", "environment", "created_at"),
        # The overlap check and `blocks_system_deletion`.
        Index("ix_declarations_system_type", "system_id", "type"),
        CheckConstraint(
            "type IN ('guarantee_of_origin', 'production_subsidy', 'feed_in')", name="type"
        ),
        CheckConstraint(
            "status IN ('draft', 'submitted', 'approved', 'rejected', 'withdrawn')", name="status"
        ),
        CheckConstraint("environment IN ('live', 'test')", name="environment"),
        CheckConstraint("period_start <= period_end", name="period"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    # A system can only be deleted while none of its declarations is submitted or approved;
    # its drafts and closed (rejected, withdrawn) declarations go with it.
    system_id: Mapped[str] = mapped_column(ForeignKey("systems.id", ondelete="CASCADE"))
    type: Mapped[DeclarationType] = mapped_column(StrEnumType(DeclarationType, 32))
    # Local calendar days of the system's time zone, both inclusive.
    period_start: Mapped[date] = mapped_column(Date())
    period_end: Mapped[date] = mapped_column(Date())
    # Both null while the period has no reading at all (a draft may exist before its readings;
    # submitting needs coverage). `energy_wh` null = not stated: it follows the metered energy.
    energy_wh: Mapped[float | None] = mapped_column(Float(), nullable=True)
    metered_energy_wh: Mapped[float | None] = mapped_column(Float(), nullable=True)
    coverage: Mapped[float] = mapped_column(Float())
    status: Mapped[DeclarationStatus] = mapped_column(StrEnumType(DeclarationStatus, 16))
    status_reason: Mapped[str | None] = mapped_column(Text(), nullable=True)
    reference: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    submitted_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class DeclarationTransition(Base):
    """One row per transition of the state machine (creation and changes included): the audit
    trail behind `GET /declarations/{id}/history`."""

    __tablename__ = "declaration_transitions"

    id: Mapped[int] = mapped_column(Integer(), primary_key=True, autoincrement=True)
    declaration_id: Mapped[str] = mapped_column(
        ForeignKey("declarations.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(UtcDateTime())
    # An API key id (`key_…`), "operator" (the CLI) or "sandbox" (the automatic decision).
    actor: Mapped[str] = mapped_column(String(40))
    action: Mapped[DeclarationAction] = mapped_column(StrEnumType(DeclarationAction, 16))
    from_status: Mapped[DeclarationStatus | None] = mapped_column(
        StrEnumType(DeclarationStatus, 16), nullable=True
    )
    to_status: Mapped[DeclarationStatus] = mapped_column(StrEnumType(DeclarationStatus, 16))
    reason: Mapped[str | None] = mapped_column(Text(), nullable=True)
