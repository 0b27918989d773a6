"""Monthly partitions of `readings` on PostgreSQL: created ahead, retired past retention.

The migration (`0016_readings_partitions`) turns `readings` into a table partitioned by range
of `start_s`, with one partition per UTC month in the schema `readings_partitions`, the table
as it was before the cut-over as one partition, and a `DEFAULT` partition for anything no
month holds. The change feed's log (`change_batches`, by month of its batches' `lo_s`) is
partitioned the same way since `0021_change_batches` (`batches_m2026_12`, …), so a month of
readings and its log go together. The daily job `readings.partitions` (below) keeps `MONTHS_AHEAD` months of both ahead
and, when `SOLARAPI_READINGS_RETENTION_MONTHS` is set, drops whole months of both past it — a
`DROP TABLE` of a month instead of a `DELETE` of every row in it. SQLite keeps one table each:
retention deletes their rows past the horizon one by one.

Retention covers raw quarter-hours only. Hourly and daily rollups (a quarter and a 96th of
the rows) stay, so `1h`/`1d`/`1w`/`1M` answers stay whole past the horizon while `15m`/`30m`
answers, market value (which reads quarter-hours) and replacing old readings end there.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.db import POSTGRESQL, SQLITE, session_backend
from solarapi.models.readings import ChangeBatch
from solarapi.models.systems import System
from solarapi.readings.store_sqlite import pack_stale_chunks

log = logging.getLogger(__name__)

SCHEMA = "readings_partitions"
MONTHS_AHEAD = 3
_MONTH_TABLE = re.compile(r"^m(\d{4})_(\d{2})$")


def month_start(moment: datetime, months_later: int = 0) -> datetime:
    """The first instant (UTC) of the month `months_later` after `moment`'s."""
    index = moment.year * 12 + (moment.month - 1) + months_later
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def month_table(start: datetime) -> str:
    return f"m{start:%Y_%m}"


def retention_horizon(session: AsyncSession, now: datetime) -> datetime | None:
    """The first instant whose raw quarter-hours are still kept (None: all are kept), under the
    settings of the app or worker the session belongs to (`db.sessionmaker_for`). An upload
    before it would be stored only until the next maintenance, and would recompute rollups of a
    day whose other quarter-hours are gone, so it is refused."""
    settings = session.info.get("settings")
    months = settings.readings_retention_months if isinstance(settings, Settings) else None
    return None if months is None else month_start(now, -months)


# The longest the job waits for each lock it needs to create months (`_lock_for_attach`).
LOCK_WAIT_MS = 100


class AttachBusy(Exception):
    """The locks for creating months were not free within `LOCK_WAIT_MS`: nothing was done."""


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What one pass did: partitions created, months dropped, rows moved out of the default
    partition into a new month, rows of the default partition removed past retention."""

    created: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    moved_rows: int = 0
    purged_rows: int = 0


class ReadingPartitions(Protocol):
    async def retire_empty_cut_over(self, session: AsyncSession) -> bool: ...

    async def maintain(
        self, session: AsyncSession, now: datetime, retention_months: int | None
    ) -> Maintenance: ...

    async def months(self, session: AsyncSession) -> list[datetime]: ...


async def _forget_changes(session: AsyncSession, horizon: datetime, *, delete: bool) -> None:
    """The change feed's log past the horizon goes with the readings (a batch's rows are read
    from `readings`, so a client that starts the feed afresh is never handed readings that
    are no longer stored; the batches must not outlive them either). The systems that wrote
    readings there (every write has a batch) have changed data (`System.data_version`).
    `delete`: remove the batches here (one table) — those wholly past the horizon, and a
    batch across it starts at it; partitioned, the months of batches (one row per month a
    write touched) go with the readings' months."""
    horizon_s = int(horizon.timestamp())
    await session.execute(
        update(System)
        .where(
            System.id.in_(
                select(ChangeBatch.system_id).where(ChangeBatch.lo_s < horizon_s).distinct()
            )
        )
        .values(data_version=System.data_version + 1)
        .execution_options(synchronize_session=False)
    )
    if delete:
        await session.execute(
            text("DELETE FROM change_batches WHERE hi_s < :horizon"), {"horizon": horizon_s}
        )
        await session.execute(
            text("UPDATE change_batches SET lo_s = :horizon WHERE lo_s < :horizon"),
            {"horizon": horizon_s},
        )


class SingleTable:
    """SQLite: one table; retention deletes the raw quarter-hours past it row by row."""

    async def retire_empty_cut_over(self, session: AsyncSession) -> bool:
        return False

    async def maintain(
        self, session: AsyncSession, now: datetime, retention_months: int | None
    ) -> Maintenance:
        if retention_months is None:
            return Maintenance()
        horizon = month_start(now, -retention_months)
        result = await session.execute(
            text("DELETE FROM readings WHERE start_s < :horizon"),
            {"horizon": int(horizon.timestamp())},
        )
        await _forget_changes(session, horizon, delete=True)
        # The deleted rows' triggers left the chunk across the horizon stale (and the others
        # whose rows all went are gone): packed again, or its days would be read row by row.
        await pack_stale_chunks(session)
        return Maintenance(purged_rows=int(getattr(result, "rowcount", 0) or 0))

    async def months(self, session: AsyncSession) -> list[datetime]:
        return []


@dataclass(frozen=True, slots=True)
class _Partitioned:
    """A table partitioned by month of `key`: its partitions are named with `prefix`
    (`m2026_12`, `before_cut_over`, `outside_every_month` for `readings`)."""

    parent: str
    prefix: str
    key: str = "start_s"

    def month(self, start: datetime) -> str:
        return f"{self.prefix}{month_table(start)}"

    @property
    def cut_over(self) -> str:
        return f"{self.prefix}before_cut_over"

    @property
    def default(self) -> str:
        return f"{self.prefix}outside_every_month"


# The readings and the change feed's batches (migration 0021): the same months, so a month of
# readings and its batches go together. `Maintenance` names the readings' partitions.
_READINGS = _Partitioned("readings", "")
_LOG = _Partitioned("change_batches", "batches_", "lo_s")


class MonthlyPartitions:
    """PostgreSQL: one partition per UTC month of `start_s`, of `readings` and of the change
    feed's log alike."""

    async def months(self, session: AsyncSession) -> list[datetime]:
        return sorted(start for start in (await self._partitions(session)).values() if start)

    async def _partitions(
        self, session: AsyncSession, table: _Partitioned = _READINGS
    ) -> dict[str, datetime | None]:
        """Partition name → the first instant of its month (None: not a month's)."""
        rows = await session.execute(
            text(
                "SELECT c.relname FROM pg_inherits i"
                " JOIN pg_class c ON c.oid = i.inhrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE i.inhparent = CAST(:parent AS regclass) AND n.nspname = :schema"
            ),
            {"schema": SCHEMA, "parent": f"public.{table.parent}"},
        )
        partitions: dict[str, datetime | None] = {}
        for (name,) in rows:
            match = _MONTH_TABLE.match(name.removeprefix(table.prefix))
            partitions[name] = (
                datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC) if match else None
            )
        return partitions

    async def _cut_over(
        self, session: AsyncSession, table: _Partitioned = _READINGS
    ) -> datetime | None:
        """Where the table from before partitioning ends (None once it is gone)."""
        bound = (
            await session.execute(
                text(
                    "SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = :schema AND c.relname = :name"
                ),
                {"schema": SCHEMA, "name": table.cut_over},
            )
        ).scalar()
        if bound is None:
            return None
        upper = re.search(r"TO \('?(-?\d+)'?\)", str(bound))
        assert upper is not None, bound
        return datetime.fromtimestamp(int(upper[1]), UTC)

    async def retire_empty_cut_over(self, session: AsyncSession) -> bool:
        """Drop the table from before the cut-over when it holds nothing (a fresh install):
        otherwise history uploaded later (a backfill) would land in it for ever, one table that
        retention can only delete from row by row, instead of in months of its own. Run in a
        transaction of its own: dropping a partition locks its table whole until the commit.
        Behind a long transaction the lock is not waited for (readers and writers would queue
        behind it): the next day's run tries again. True when the readings' was dropped (the
        log's goes the same way, `readings` first, the order every writer locks in)."""
        retired = await self._retire(session, _READINGS)
        await self._retire(session, _LOG)
        return retired

    async def _retire(self, session: AsyncSession, table: _Partitioned) -> bool:
        exists = text(f"SELECT EXISTS (SELECT 1 FROM {SCHEMA}.{table.cut_over})")  # noqa: S608
        if await self._cut_over(session, table) is None or (await session.execute(exists)).scalar():
            return False
        await session.execute(text("SET LOCAL lock_timeout = '2s'"))
        try:
            async with session.begin_nested():
                # The parent first, the order every writer locks in; then look again.
                await session.execute(
                    text(f"LOCK TABLE public.{table.parent} IN ACCESS EXCLUSIVE MODE")
                )
                if (await session.execute(exists)).scalar():
                    return False
                await session.execute(text(f"DROP TABLE {SCHEMA}.{table.cut_over}"))
        except DBAPIError as exc:
            if "lock timeout" not in str(exc):
                raise
            log.info("partitions: '%s' is busy; retiring it next time", table.cut_over)
            return False
        return True

    async def maintain(
        self, session: AsyncSession, now: datetime, retention_months: int | None
    ) -> Maintenance:
        # One maintainer at a time across workers: the lock ends with the transaction.
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext('readings.partitions'))"))
        wanted = {month_start(now, ahead) for ahead in range(MONTHS_AHEAD + 1)}
        horizon = None if retention_months is None else month_start(now, -retention_months)
        if horizon is not None:
            # Before anything is deleted: which systems' data that changes.
            await _forget_changes(session, horizon, delete=False)
        # Found once, before the locks: a month a backfill starts after this waits for the
        # next run (it is never created without them).
        missing = {
            table: await self._missing(session, table, wanted) for table in (_LOG, _READINGS)
        }
        if any(missing.values()):
            await self._lock_for_attach(session)
        readings = await self._maintain(session, _READINGS, missing[_READINGS], horizon)
        await self._maintain(session, _LOG, missing[_LOG], horizon)
        return readings

    async def _lock_for_attach(self, session: AsyncSession) -> None:
        """Hold what creating months needs before the first is created, or give up at once
        (`AttachBusy`; the job tries again shortly).

        While a month is attached, a write already routed to the default partition would wait
        for the default's lock and then fail its changed constraint (a 500, SQLSTATE 23514:
        PostgreSQL does not route the row again). So writers wait until the months are
        committed: both parents in `SHARE ROW EXCLUSIVE` mode (reads go on), in the order
        writers take them (the log's batch row before the readings), and both default
        partitions, which `ATTACH` locks `ACCESS EXCLUSIVE`, up front. Each lock is waited for
        at most `LOCK_WAIT_MS`: a writer whose transaction already read the default partition and
        now waits for the log behind this job would otherwise deadlock with it, and
        PostgreSQL's deadlock check (after 1 s) might abort the writer; giving up well before
        that leaves the writer be."""
        await session.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT_MS}ms'"))
        try:
            await session.execute(
                text(
                    "LOCK TABLE ONLY public.change_batches, public.readings"
                    " IN SHARE ROW EXCLUSIVE MODE"
                )
            )
            await session.execute(
                text(
                    f"LOCK TABLE {SCHEMA}.{_LOG.default}, {SCHEMA}.{_READINGS.default}"
                    " IN ACCESS EXCLUSIVE MODE"
                )
            )
        except DBAPIError as exc:
            if "lock timeout" in str(exc):
                raise AttachBusy from exc
            raise
        await session.execute(text("SET LOCAL lock_timeout = DEFAULT"))

    async def _missing(
        self, session: AsyncSession, table: _Partitioned, wanted: set[datetime]
    ) -> list[datetime]:
        """The months `table` lacks: the wanted ones and those the default partition holds
        rows of (a backfill of history), but for a month that exists or that the table from
        before the cut-over holds."""
        existing = {start for start in (await self._partitions(session, table)).values() if start}
        cut_over = await self._cut_over(session, table)
        return [
            start
            for start in sorted(wanted | await self._stray_months(session, table))
            if start not in existing and (cut_over is None or start >= cut_over)
        ]

    async def _maintain(
        self,
        session: AsyncSession,
        table: _Partitioned,
        missing: list[datetime],
        horizon: datetime | None,
    ) -> Maintenance:
        partitions = await self._partitions(session, table)
        existing = {start for start in partitions.values() if start}
        cut_over = await self._cut_over(session, table)
        created: list[str] = []
        moved = 0
        for start in missing:  # (`_missing`: wanted ones and those a backfill needs)
            moved += await self._create(session, table, start, month_start(start, 1))
            created.append(table.month(start))
            existing.add(start)
        dropped: list[str] = []
        purged = 0
        if horizon is not None:
            # Rows past the horizon that are not a whole month of their own go row by row.
            tables = [table.default]
            if cut_over is not None and cut_over > horizon:
                tables.append(table.cut_over)
            for name in tables:
                result = await session.execute(
                    text(f"DELETE FROM {SCHEMA}.{name} WHERE {table.key} < :horizon"),  # noqa: S608
                    {"horizon": int(horizon.timestamp())},
                )
                purged += int(getattr(result, "rowcount", 0) or 0)
            # Whole months last: a DROP locks the table whole until the commit, so nothing
            # slow may follow it in this transaction.
            for start in sorted(existing):
                if month_start(start, 1) <= horizon:
                    await session.execute(text(f"DROP TABLE {SCHEMA}.{table.month(start)}"))
                    dropped.append(table.month(start))
            if cut_over is not None and cut_over <= horizon:
                await session.execute(text(f"DROP TABLE {SCHEMA}.{table.cut_over}"))
                dropped.append(table.cut_over)
        return Maintenance(tuple(created), tuple(dropped), moved, purged)

    async def _stray_months(self, session: AsyncSession, table: _Partitioned) -> set[datetime]:
        """The UTC months of the rows in the default partition (normally none)."""
        rows = await session.execute(
            text(
                f"SELECT DISTINCT date_trunc('month', to_timestamp({table.key}) AT TIME ZONE 'UTC')"  # noqa: S608
                f" FROM {SCHEMA}.{table.default}"
            )
        )
        return {month.replace(tzinfo=UTC) for (month,) in rows}

    async def _create(
        self, session: AsyncSession, table: _Partitioned, start: datetime, end: datetime
    ) -> int:
        """Create the month [start, end); rows the default partition already holds for it
        move in first (attaching a range the default partition has rows of would fail)."""
        name = f"{SCHEMA}.{table.month(start)}"
        lo, hi = int(start.timestamp()), int(end.timestamp())
        await session.execute(
            text(f"CREATE TABLE {name} (LIKE public.{table.parent} INCLUDING DEFAULTS)")
        )
        result = await session.execute(
            text(
                f"WITH moved AS (DELETE FROM {SCHEMA}.{table.default}"  # noqa: S608
                f" WHERE {table.key} >= {lo} AND {table.key} < {hi} RETURNING *)"
                f" INSERT INTO {name} SELECT * FROM moved"
            )
        )
        moved = int(getattr(result, "rowcount", 0) or 0)
        check = f"{table.month(start)}_range"
        await session.execute(
            text(
                f"ALTER TABLE {name} ADD CONSTRAINT {check}"
                f" CHECK ({table.key} >= {lo} AND {table.key} < {hi})"
            )
        )
        await session.execute(
            text(
                f"ALTER TABLE public.{table.parent} ATTACH PARTITION {name}"
                f" FOR VALUES FROM ({lo}) TO ({hi})"
            )
        )
        await session.execute(text(f"ALTER TABLE {name} DROP CONSTRAINT {check}"))
        if moved:
            log.warning("moved %d row(s) from the default partition into %s", moved, name)
        return moved


_PARTITIONS: dict[str, ReadingPartitions] = {
    SQLITE.name: SingleTable(),
    POSTGRESQL.name: MonthlyPartitions(),
}


def reading_partitions(session: AsyncSession) -> ReadingPartitions:
    """The partition keeper of the session's database."""
    return _PARTITIONS[session_backend(session).name]
