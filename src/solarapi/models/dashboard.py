"""Tables of the dashboard area: server-side web sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base, UtcDateTime


class WebSession(Base):
    """A logged-in browser. The cookie carries a random token; only its HMAC is stored, so a
    copy of the database does not let anyone take over a session."""

    __tablename__ = "web_sessions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    # The nonce of the last "create key" form this session submitted: a re-submitted form
    # (browser reload of the result page) must not issue a second key.
    last_form_nonce: Mapped[str | None] = mapped_column(String(64), nullable=True)
