"""Tables of the readings area: raw quarter-hours and their hourly and daily rollups.

Time keys here are integer epoch seconds (UTC), not `UtcDateTime`, on purpose: they are the
grid coordinates of a time series with millions of rows. An 8-byte integer keeps the primary
key (and so every range scan) small on both databases, compares without string parsing on
SQLite, and goes straight into numpy for bucketing. Names carry the unit (`start_s`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
)
from sqlalchemy.orm import Mapped, mapped_column

from solarapi.kit.plans import Environment
from solarapi.models.base import NAMING_CONVENTION, Base, StrEnumType
from solarapi.models.systems import System

# No foreign key to `systems` on any table here (a key's check per row cost a bulk upload more
# than the row: migrations 0018 and 0019_readings_without_fk). Every writer holds the system's
# row lock and writes nothing when the system is gone; a trigger on `systems` deletes a deleted
# system's rows. The owner is declared on the column instead, for account erasure
# (`admin.repository`), and each table depends on `systems` for the tables' order.
OWNER = {"owner": "systems.id"}

# SQLite: a WITHOUT ROWID table is clustered on its primary key, so one system's range of
# quarter-hours is contiguous on disk (PostgreSQL ignores the option).
_CLUSTERED = {"sqlite_with_rowid": False}


class Reading(Base):
    """One metered quarter-hour: energy produced in [start_s, start_s + 900)."""

    __tablename__ = "readings"
    # PostgreSQL: by month of `start_s` (readings.partitions; SQLite ignores it).
    __table_args__ = ({**_CLUSTERED, "postgresql_partition_by": "RANGE (start_s)"},)

    system_id: Mapped[str] = mapped_column(String(40), primary_key=True, info=OWNER)
    start_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    energy_wh: Mapped[float] = mapped_column(Float)
    power_w: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The change feed's batch that last wrote the row (`ChangeBatch.seq`): not indexed, and
    # NULL only for a row no write has entered in the feed (none since migration 0021).
    batch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class ReadingHour(Base):
    """Rollup of the readings in one UTC hour [hour_s, hour_s + 3600)."""

    __tablename__ = "reading_hours"
    __table_args__ = (_CLUSTERED,)

    system_id: Mapped[str] = mapped_column(String(40), primary_key=True, info=OWNER)
    hour_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    energy_wh: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    power_max_w: Mapped[float | None] = mapped_column(Float, nullable=True)


class ReadingDay(Base):
    """Rollup of the readings in one day of the system's local calendar, keyed by the UTC
    instant of its local midnight (so 23- and 25-hour days need no special case)."""

    __tablename__ = "reading_days"
    __table_args__ = (_CLUSTERED,)

    system_id: Mapped[str] = mapped_column(String(40), primary_key=True, info=OWNER)
    day_start_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    energy_wh: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    power_max_w: Mapped[float | None] = mapped_column(Float, nullable=True)


class ReadingDayChunk(Base):
    """SQLite's packed copy of `reading_days`: a system's local-day rollup rows whose
    `day_start_s >> 22` is `chunk` (~48.5 days), as one blob of little-endian records
    (`day_start_s` int64, `energy_wh` float64, `samples` int64, `power_max_w` float64, NaN for
    NULL) in time order. A range of days is then one or two values handed over by `sqlite3`
    per system instead of three per day (each a Python object first: ~20 ms for a month of
    1,000 systems' days, the portfolio's read).

    Kept exact in the writing transaction: triggers on `reading_days` (migration 0022) set
    `days` to NULL (stale) for every chunk a row is inserted into, updated in or deleted from
    (and drop the chunk's row once it has no days), whoever writes; the readings store's
    rollup upsert packs the chunks it touched again before its transaction commits. A reader
    reads a stale chunk's days from `reading_days` itself. On PostgreSQL the table stays
    empty (its read packs the rows in SQL, `float8send`)."""

    __tablename__ = "reading_day_chunks"
    # A rowid table, not `_CLUSTERED`: a full chunk (1,552 bytes) does not fit in place in an
    # index b-tree's 4 KiB page and was read through an overflow page (migration 0023).

    system_id: Mapped[str] = mapped_column(String(40), primary_key=True, info=OWNER)
    chunk: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    days: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


# Tables of SQLite alone: created there by their migration, nothing on PostgreSQL, so not in
# `Base.metadata` (the schema of both databases); tests/contract/test_migrations.py compares
# a migrated SQLite database with both.
SQLITE_ONLY = MetaData(naming_convention=NAMING_CONVENTION)

# SQLite's packed copy of `reading_hours`, as `reading_day_chunks` is of `reading_days`: a
# system's hourly rollup rows whose `hour_s >> 17` is `chunk` (~36.4 hours; 1,184 bytes
# full), one blob of the same records (`hour_s` int64, `energy_wh` float64, `samples` int64,
# `power_max_w` float64, NaN for NULL) in time order, kept exact the same way by triggers
# on `reading_hours` and the store's rollup upsert (migration 0024, `store_sqlite.Chunks`).
# A day of hours, the `1h` read, is one or two values from `sqlite3` instead of 24 rows. A
# rowid table. Its rows go with their system's hours (the delete trigger), so an account's
# erasure, which deletes the models' rows, leaves none behind.
READING_HOUR_CHUNKS = Table(
    "reading_hour_chunks",
    SQLITE_ONLY,
    Column("system_id", String(40), primary_key=True, info=OWNER),
    Column("chunk", BigInteger, primary_key=True, autoincrement=False),
    Column("hours", LargeBinary, nullable=True),
)


# SQLite's packed copy of `readings`, as the chunks above are of the rollups: a system's
# quarter-hours whose `start_s >> 16` is `chunk` (~18.2 hours; 1,752 bytes full), one blob
# of little-endian records (`start_s` int64, `energy_wh` float64, `power_w` float64, NaN for
# NULL) in time order, kept exact the same way by triggers on `readings` and the store's
# readings upsert (migration 0025, `store_sqlite.Chunks`). The last 24 hours at `15m` are
# two or three values from `sqlite3` instead of 96 rows. A rowid table; its rows go with
# their system's readings (the delete trigger).
READING_CHUNKS = Table(
    "reading_chunks",
    SQLITE_ONLY,
    Column("system_id", String(40), primary_key=True, info=OWNER),
    Column("chunk", BigInteger, primary_key=True, autoincrement=False),
    Column("quarters", LargeBinary, nullable=True),
)


class ChangeBatch(Base):
    """The change feed's log (`GET /readings/changes`, docs/changes.md): one row per write of
    a system's readings (an upload, a replacement, an import) — on PostgreSQL one per month of
    `start_s` the write touches, all with the same `seq` — at the position (`txid`, `seq`):
    `seq` a new number per write (PostgreSQL: the table's sequence; SQLite: the
    AUTOINCREMENT rowid, so one row per write there), `txid` the writer's transaction id on
    PostgreSQL (`pg_current_xact_id()`; 0 on SQLite, whose writers are serialised so that
    commit order is `seq` order). The write's readings carry `batch` = `seq`; the batch's
    rows are those of `readings` in (`system_id`, `lo_s`..`hi_s`) whose `batch` is still its
    `seq` (a replaced reading moves to the replacing write's batch; the batch it left keeps
    its row, emptier, until retention).

    No foreign key, as for the readings (`OWNER`). On PostgreSQL partitioned by month of
    `lo_s` like `readings` (`readings.partitions`), where `seq` is not a key (a partitioned
    table's keys hold the partition key, and a write's month rows share it)."""

    __tablename__ = "change_batches"
    __table_args__ = (
        Index("ix_change_batches_feed", "account_id", "environment", "txid", "seq"),
        Index("ix_change_batches_system", "system_id", "lo_s"),
        {"sqlite_autoincrement": True, "postgresql_partition_by": "RANGE (lo_s)"},
    )

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    account_id: Mapped[str] = mapped_column(String(40))
    environment: Mapped[Environment] = mapped_column(StrEnumType(Environment, 4))
    txid: Mapped[int] = mapped_column(BigInteger)
    system_id: Mapped[str] = mapped_column(String(40), info=OWNER)
    lo_s: Mapped[int] = mapped_column(BigInteger)
    hi_s: Mapped[int] = mapped_column(BigInteger)


for _model in (Reading, ReadingHour, ReadingDay, ReadingDayChunk, ChangeBatch):
    Base.metadata.tables[_model.__tablename__].add_is_dependent_on(
        Base.metadata.tables[System.__tablename__]
    )
