"""Accounts (the paying customer), their users (people who log in) and API keys."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment, Plan
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    plan: Mapped[Plan] = mapped_column(StrEnumType(Plan, 20))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # Set when the sandbox's simulated systems were provisioned (first sandbox use).
    sandbox_provisioned_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # Set by `solarapi accounts disable`: its keys are refused (401), its users cannot log in.
    disabled_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    # Stored lower-cased; unique across the service.
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_account_env", "account_id", "environment"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    # HMAC-SHA256 (hex) of the full key under the server secret; the key itself is never stored.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    display: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class AuthEpoch(Base):
    """One row whose `epoch` grows in the same transaction as every change to what a caller's
    `Principal` is made of: an API key (but its `last_used_at`) or an account. Triggers on
    `api_keys` and `accounts` bump it (migration 0020), so no write path can forget to; the
    gateway keeps Principals under it instead of under every commit (`db.committed_version`),
    so uploads of readings leave the kept callers alone."""

    __tablename__ = "auth_epoch"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(BigInteger)
