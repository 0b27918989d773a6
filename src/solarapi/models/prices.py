"""Tables of the prices area.

Day-ahead prices are market data, shared by every account (live environment only; the
sandbox simulates its prices). One row is one published price period of one bidding zone:
`[start, start + resolution_s)`. The European day-ahead market moved from hourly to 15-minute
products on 2025-10-01, so one zone's history holds PT60M rows before and PT15M rows after;
stored rows of one zone never overlap (the import service keeps that invariant).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base, UtcDateTime


class MarketPrice(Base):
    __tablename__ = "market_prices"
    __table_args__ = (
        CheckConstraint("resolution_s IN (900, 1800, 3600)", name="resolution"),
        CheckConstraint("source IN ('entsoe', 'csv', 'simulated')", name="source"),
    )

    # Primary key (zone, start): the upsert key, and the index every range query uses.
    zone: Mapped[str] = mapped_column(String(16), primary_key=True)
    start: Mapped[datetime] = mapped_column(UtcDateTime(), primary_key=True)
    resolution_s: Mapped[int] = mapped_column(Integer())
    price_eur_per_mwh: Mapped[float] = mapped_column(Float(precision=53))
    source: Mapped[str] = mapped_column(String(10))
    imported_at: Mapped[datetime] = mapped_column(UtcDateTime())


class MarketPriceZone(Base):
    """One row per zone that has prices: `version` grows with every import, so readers in
    any process can tell with one primary-key lookup whether their cached prices are stale."""

    __tablename__ = "market_price_zones"

    zone: Mapped[str] = mapped_column(String(16), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
