"""Tables of the ingest area: tokens that let one system's data logger upload readings."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base, UtcDateTime


class IngestToken(Base):
    """An `ik_…` token of one system. Only its HMAC is stored (like API keys), so a copy of
    the database uploads nothing."""

    __tablename__ = "ingest_tokens"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # Deleting the system deletes its tokens: they can never point at a later system.
    system_id: Mapped[str] = mapped_column(ForeignKey("systems.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    display: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
