"""Tables of the jobs area: the one job queue (reports, webhook deliveries, ...)."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base, StrEnumType, UtcDateTime


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # The claim query scans due jobs of one status in run_at order.
        Index("ix_jobs_status_run_at", "status", "run_at"),
        # The fair claim counts each account's running jobs.
        Index("ix_jobs_account_status", "account_id", "status"),
        CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="status"
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Whose job it is (null: the service's own): the claim takes accounts in turn.
    account_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    status: Mapped[JobStatus] = mapped_column(StrEnumType(JobStatus, 12))
    # Attempts started so far (a claim counts one); the job fails after max_attempts.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    run_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # Which worker holds the job and until when; a lease past its expiry means the worker died.
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
