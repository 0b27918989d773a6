"""Table of the performance area: measured irradiance per system and quarter-hour.

One row per (system, source, quarter-hour): a quarter-hour may hold both a `sensor` row
(uploaded plane-of-array irradiance) and a `satellite` row (imported GHI/DNI/DHI); the model
takes the best. Time keys are epoch seconds, as in `models.readings`.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.models.base import Base

IRRADIANCE_SOURCES = ("sensor", "satellite")


class IrradianceReading(Base):
    """Mean irradiance of [start_s, start_s + 900): `sensor` rows carry `poa_w_m2`,
    `satellite` rows `ghi_w_m2`/`dni_w_m2`/`dhi_w_m2`; temperatures are optional."""

    __tablename__ = "irradiance"
    __table_args__ = (
        CheckConstraint("source IN ('sensor', 'satellite')", name="source"),
        {"sqlite_with_rowid": False},
    )

    system_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("systems.id", ondelete="CASCADE"), primary_key=True
    )
    source: Mapped[str] = mapped_column(String(10), primary_key=True)
    start_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    poa_w_m2: Mapped[float | None] = mapped_column(Float, nullable=True)
    ghi_w_m2: Mapped[float | None] = mapped_column(Float, nullable=True)
    dni_w_m2: Mapped[float | None] = mapped_column(Float, nullable=True)
    dhi_w_m2: Mapped[float | None] = mapped_column(Float, nullable=True)
    module_temp_c: Mapped[float | None] = mapped_column(Float, nullable=True)
    ambient_temp_c: Mapped[float | None] = mapped_column(Float, nullable=True)
