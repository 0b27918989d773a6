"""Tables of the systems area: a customer's solar systems."""

from __future__ import annotations

import enum
from dataclasses import FrozenInstanceError, dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import Base, StrEnumType, UtcDateTime


class SystemStatus(enum.StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"
    DECOMMISSIONED = "decommissioned"


class DataSource(enum.StrEnum):
    """Where a system's readings come from: uploads (`metered`), or the sandbox's physical
    model (`simulated`, test environment only)."""

    METERED = "metered"
    SIMULATED = "simulated"


SYSTEM_STATUSES = tuple(member.value for member in SystemStatus)


@dataclass(frozen=True, slots=True)
class ModelParameters:
    """The performance model's per-system parameters (`model` in the API): PVWatts' power
    temperature coefficient (%/°C), system losses (%) and the nominal inverter efficiency (a
    fraction). The defaults are the contract's; a system's `model_*` columns override them."""

    gamma_pdc_pct_per_c: float = -0.37
    losses_pct: float = 14.0
    inverter_efficiency: float = 0.96


DEFAULT_MODEL = ModelParameters()


class System(Base):
    __tablename__ = "systems"
    __table_args__ = (
        # The list endpoint's filter and order: one account's environment by (created_at, id).
        Index("ix_systems_account_env_created", "account_id", "environment", "created_at", "id"),
        CheckConstraint("environment IN ('live', 'test')", name="environment"),
        CheckConstraint("status IN ('active', 'inactive', 'decommissioned')", name="status"),
        CheckConstraint("data_source IN ('metered', 'simulated')", name="data_source"),
        CheckConstraint(
            "monitoring_offline_after_hours BETWEEN 1 AND 168", name="monitoring_offline_hours"
        ),
        CheckConstraint(
            "monitoring_underperformance_threshold BETWEEN 0.1 AND 1.0",
            name="monitoring_threshold",
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    name: Mapped[str] = mapped_column(String(100))
    status: Mapped[SystemStatus] = mapped_column(StrEnumType(SystemStatus, 20))
    data_source: Mapped[DataSource] = mapped_column(StrEnumType(DataSource, 20))
    capacity_kwp: Mapped[float] = mapped_column(Float)
    inverter_capacity_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    latitude: Mapped[float] = mapped_column(Float)
    longitude: Mapped[float] = mapped_column(Float)
    # IANA name; drives every local-calendar bucket (1d, 1w, 1M) and the daily rollup.
    timezone: Mapped[str] = mapped_column(String(64))
    country: Mapped[str | None] = mapped_column(String(2), nullable=True)
    tilt_deg: Mapped[float] = mapped_column(Float)
    azimuth_deg: Mapped[float] = mapped_column(Float)
    market_zone: Mapped[str | None] = mapped_column(String(16), nullable=True)
    installed_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    # Starts of the first and last stored quarter-hours; kept current by every upload.
    first_reading_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    last_reading_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # The performance model's per-system overrides (`model` in the API); NULL = the default.
    model_gamma_pdc_pct_per_c: Mapped[float | None] = mapped_column(Float, nullable=True)
    model_losses_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    model_inverter_efficiency: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Whether tilt/azimuth are the contract's defaults rather than given by the owner: the
    # performance endpoint says so in `meta.model`.
    tilt_defaulted: Mapped[bool] = mapped_column(Boolean, server_default=false(), default=False)
    azimuth_defaulted: Mapped[bool] = mapped_column(Boolean, server_default=false(), default=False)
    # The alert rules' settings (`monitoring` in the API; alerts/ reads them).
    monitoring_enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    monitoring_offline_after_hours: Mapped[int] = mapped_column(Integer, default=4)
    monitoring_underperformance_threshold: Mapped[float] = mapped_column(Float, default=0.8)
    # Raised in the transaction of every write to the system's measured data (readings,
    # irradiance, retention): what is derived from that data alone is kept while it holds.
    data_version: Mapped[int] = mapped_column(BigInteger, server_default="0", default=0)


class SystemCount(Base):
    """How many systems an environment has of each status and zone: the list's `total`
    (`GET /systems`, filtered or not) as a sum of a few rows instead of a count of every
    system on every page (on PostgreSQL a sequential scan of the table: 0.10 ms of
    PostgreSQL's CPU on each page of a 1,000-system account, growing with the fleet). Kept
    by triggers on `systems` (migration 0026), in the statement that inserts, deletes or
    moves a system, whoever writes, so no write path can forget it; nothing in Python
    writes it.

    `market_zone` is '' for a system without one (a key column cannot be NULL). A count
    that falls to 0 is deleted. No foreign key: an account's deletion cascades to its
    systems, whose triggers then empty these rows."""

    __tablename__ = "system_counts"

    account_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4), primary_key=True)
    status: Mapped[SystemStatus] = mapped_column(StrEnumType(SystemStatus, 20), primary_key=True)
    market_zone: Mapped[str] = mapped_column(String(16), primary_key=True)
    systems: Mapped[int] = mapped_column(Integer)


class _SystemColumns(NamedTuple):
    """The table's columns, in table order: the values of a `SystemRecord`."""

    id: str
    account_id: str
    environment: Environment
    name: str
    status: SystemStatus
    data_source: DataSource
    capacity_kwp: float
    inverter_capacity_kw: float | None
    latitude: float
    longitude: float
    timezone: str
    country: str | None
    tilt_deg: float
    azimuth_deg: float
    market_zone: str | None
    installed_on: date | None
    first_reading_at: datetime | None
    last_reading_at: datetime | None
    created_at: datetime
    updated_at: datetime
    model_gamma_pdc_pct_per_c: float | None = None
    model_losses_pct: float | None = None
    model_inverter_efficiency: float | None = None
    tilt_defaulted: bool = False
    azimuth_defaulted: bool = False
    monitoring_enabled: bool = True
    monitoring_offline_after_hours: int = 4
    monitoring_underperformance_threshold: float = 0.8
    data_version: int = 0


class SystemRecord(_SystemColumns):
    """A system as read, outside any session, for code that only reads it. Frozen: a write
    fails at once (`FrozenInstanceError`, as from a frozen dataclass), where one to an ORM
    object outside the session would silently vanish. Its fields are the table's columns,
    in table order.

    A NamedTuple, made from a row in C (`_make`, ~0.2 µs), where a frozen dataclass of 29
    fields took ~2.7 µs to build: every readings request reads one."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def model_parameters(system: System | SystemRecord) -> ModelParameters:
    """The system's model parameters: its overrides, else the defaults."""
    return ModelParameters(
        gamma_pdc_pct_per_c=_or(
            system.model_gamma_pdc_pct_per_c, DEFAULT_MODEL.gamma_pdc_pct_per_c
        ),
        losses_pct=_or(system.model_losses_pct, DEFAULT_MODEL.losses_pct),
        inverter_efficiency=_or(
            system.model_inverter_efficiency, DEFAULT_MODEL.inverter_efficiency
        ),
    )


def model_overrides(system: System | SystemRecord) -> tuple[str, ...]:
    """Names of the parameters the system overrides."""
    return tuple(
        name
        for name, value in (
            ("gamma_pdc_pct_per_c", system.model_gamma_pdc_pct_per_c),
            ("losses_pct", system.model_losses_pct),
            ("inverter_efficiency", system.model_inverter_efficiency),
        )
        if value is not None
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


# What code that only reads a system takes: the frozen record, or the ORM object where the
# caller holds one anyway (a write path, a list); both have the same attributes.
ReadableSystem = System | SystemRecord
