"""Tables of the reports area."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class ReportKind(enum.StrEnum):
    """What a report holds: the one list of report types (the API's `type`)."""

    PRODUCTION = "production"
    MARKET_VALUE = "market_value"
    DECLARATIONS = "declarations"

    @property
    def heading(self) -> str:
        """The heading of its PDF and its name on the dashboard."""
        return {
            ReportKind.PRODUCTION: "Production report",
            ReportKind.MARKET_VALUE: "Market value report",
            ReportKind.DECLARATIONS: "Declarations report",
        }[self]

    @property
    def bucketed(self) -> bool:
        """Whether its rows are buckets of an `interval` (declarations list whole ones)."""
        return self is not ReportKind.DECLARATIONS


class ReportFormat(enum.StrEnum):
    """The file a report is delivered as."""

    CSV = "csv"
    PDF = "pdf"

    @property
    def content_type(self) -> str:
        return "text/csv; charset=utf-8" if self is ReportFormat.CSV else "application/pdf"


class ReportStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class Report(Base):
    __tablename__ = "reports"
    __table_args__ = (
        # Listing: one account's environment, newest first.
        Index("ix_reports_account_env_created", "account_id", "environment", "created_at", "id"),
        # The clean-up looks for completed reports past expires_at that still have a file.
        Index("ix_reports_expires_at", "expires_at"),
        CheckConstraint("status IN ('queued', 'running', 'completed', 'failed')", name="status"),
        CheckConstraint("environment IN ('live', 'test')", name="environment"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    type: Mapped[str] = mapped_column(String(20))
    format: Mapped[str] = mapped_column(String(8))
    status: Mapped[ReportStatus] = mapped_column(StrEnumType(ReportStatus, 12))
    # Normalised request parameters, as the API shows them (system ids resolved at POST time).
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)
    job_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # A message meant for the client; technical detail stays in jobs.last_error.
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    completed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # File name relative to the reports directory; null until completed and after clean-up.
    file_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    content_type: Mapped[str | None] = mapped_column(String(60), nullable=True)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    file_removed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
