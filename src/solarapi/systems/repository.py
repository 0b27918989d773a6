"""SQL for systems."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    FromClause,
    Select,
    any_,
    bindparam,
    delete,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery, api_time, session_backend
from solarapi.kit.plans import Environment
from solarapi.models.alerts import Alert
from solarapi.models.ingest import IngestToken
from solarapi.models.irradiance import IrradianceReading
from solarapi.models.readings import Reading, ReadingDay, ReadingHour
from solarapi.models.systems import System, SystemCount, SystemRecord, SystemStatus
from solarapi.systems.views import SystemView, listed_items


async def get(session: AsyncSession, system_id: str) -> System | None:
    return await session.scalar(select(System).where(System.id == system_id))


async def get_many(session: AsyncSession, system_ids: Sequence[str]) -> Sequence[System]:
    """The systems among `system_ids` that exist, in one query (any order)."""
    if not system_ids:
        return []
    rows = await session.scalars(select(System).where(System.id.in_(list(system_ids))))
    return rows.all()


_SYSTEMS = System.metadata.tables[System.__tablename__]


async def lock(session: AsyncSession, system_id: str) -> None:
    """Take the system's lock for the rest of the transaction: the one lock that serialises
    every change made under a system (uploads and their rollups, declarations, edits,
    deletion), so a check and the write it guards cannot interleave with another's.

    PostgreSQL: the system's row, FOR UPDATE; SQLite: the database's write lock
    (`Backend.lock_row`)."""
    await session_backend(session).lock_row(session, _SYSTEMS, "id", system_id, touch="name")


async def raise_data_version(session: AsyncSession, system_id: str) -> None:
    """The system's measured data changed in this transaction (`System.data_version`)."""
    await session.execute(
        update(System)
        .where(System.id == system_id)
        .values(data_version=System.data_version + 1)
        .execution_options(synchronize_session=False)
    )


async def lock_fresh(session: AsyncSession, system_id: str) -> System | None:
    """Take the system's lock (`lock`), then read the system as it is now: every rule that
    depends on it (the time zone its rollups follow, the capacity an upload is checked
    against) must see the row the lock protects, not one read before it. `populate_existing`
    overwrites an object the session read earlier, so a stale one cannot be handed back."""
    await lock(session, system_id)
    return await session.scalar(
        select(System).where(System.id == system_id).execution_options(populate_existing=True)
    )


# Every column of a system, in table order: what a record is made of.
SYSTEM_COLUMNS = tuple(System.__table__.columns)
_BY_ID = DriverQuery(select(*SYSTEM_COLUMNS).where(System.id == bindparam("id")))


async def get_record(session: AsyncSession, system_id: str) -> SystemRecord | None:
    """The system as a frozen record, read in one hand-over to the driver (no ORM object,
    no session identity map): for requests that only read it."""
    row = await _BY_ID.first(session, {"id": system_id})
    return None if row is None else record(row)


class SystemHead(NamedTuple):
    """The columns of a system a readings read needs before its rows: whose it is (the
    tenancy check), its zone (the grid) and its data source (stored or simulated). Read as
    plain strings: a `SystemRecord` converts its five datetime columns per read (~36k of a
    ~200k-instruction lookup on SQLite, callgrind), which a stored series never uses."""

    id: str
    account_id: str
    environment: str
    timezone: str
    data_source: str


# The head's columns, in its order, as SQL (the stores read it straight through the driver).
HEAD_COLUMNS = ", ".join(SystemHead._fields)


def record(values: Sequence[Any]) -> SystemRecord:
    """A SystemRecord from the values of SYSTEM_COLUMNS, converted as the ORM converts them."""
    return SystemRecord._make(values)


def _conditions(
    table: type[System] | type[SystemCount], by_status: bool, by_zone: bool
) -> list[ColumnElement[bool]]:
    conditions = [
        table.account_id == bindparam("account_id"),
        table.environment == bindparam("environment"),
    ]
    if by_status:
        conditions.append(table.status == bindparam("status"))
    if by_zone:
        conditions.append(table.market_zone == bindparam("market_zone"))
    return conditions


def _total(by_status: bool, by_zone: bool) -> Select[int]:
    """How many systems match: the sum of their `system_counts` rows (kept by triggers,
    `models.systems.SystemCount`), not a count of the systems themselves."""
    return select(func.coalesce(func.sum(SystemCount.systems), literal_column("0"))).where(
        *_conditions(SystemCount, by_status, by_zone)
    )


@functools.cache
def _page_query(by_status: bool, by_zone: bool, keys_first: bool) -> DriverQuery:
    """One page of an environment's systems and how many there are, in one statement (one
    snapshot: the total agrees with the page): the total (`_total`, a sum of
    `system_counts` rows) as an uncorrelated scalar subquery beside each row (evaluated once
    by both databases). A page past the end has no row to carry it: `_count_query` then.

    `keys_first` (`Backend.projects_skipped_rows`, PostgreSQL): the page's ids are picked
    from `ix_systems_account_env_created` alone (an index-only scan: no table row read for
    the ones OFFSET skips), then its rows read by primary key (`id = ANY(ARRAY(...))`, one
    index scan), ordered again and formatted (`db.api_time`). Reading the page in a subquery
    and formatting around it, PostgreSQL still fetched and projected every row OFFSET skips
    (~525 on an average page of a 1,000-system fleet): 5,182 k instructions of its backend a
    statement against 4,680 k now (callgrind in the backend, bench/fleet W4's statement on
    100 random pages). The index-only scan needs the visibility map: on pages not all-visible
    since the last vacuum it reads the row for each id, as the direct read did. SQLite skips
    before it computes a row's columns, and pays for a
    subquery (a co-routine and a second sort: 238 against 305 µs a page), so it reads the
    page directly.

    Not the ids joined to the table: on a table of this size PostgreSQL's planner hashes all
    of it (a sequential scan) for the page's rows. Not PostgreSQL's timestamps as
    `timestamp::text` cut in Python: 0.6 M instructions less in the backend, 0.42 M more in
    the worker (the cut of 200 values). Not the count LEFT JOINed with the page as a
    subquery: SQLite materialised that page and sorted it again, 266 against 201 µs of CPU a
    page (bench/fleet W4)."""
    conditions = _conditions(System, by_status, by_zone)
    total = _total(by_status, by_zone).scalar_subquery()
    order = (System.created_at, System.id)
    if not keys_first:
        return DriverQuery(
            select(total.label("total"), *_view_columns(_SYSTEMS))
            .where(*conditions)
            .order_by(*order)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
    keys = (
        select(System.id)
        .where(*conditions)
        .order_by(*order)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    page = _SYSTEMS.alias("page")
    return DriverQuery(
        select(total.label("total"), *_view_columns(page))
        .where(page.c.id == any_(func.array(keys.scalar_subquery())))
        .order_by(page.c.created_at, page.c.id)
    )


@functools.cache
def _count_query(by_status: bool, by_zone: bool) -> DriverQuery:
    return DriverQuery(_total(by_status, by_zone))


_TIMESTAMPS = frozenset({"first_reading_at", "last_reading_at", "created_at", "updated_at"})


def _view_columns(systems: FromClause) -> list[ColumnElement[Any]]:
    """A listed system's columns, in `SystemView`'s order, its timestamps as the API's text."""
    return [
        api_time(systems.c[field]).label(field) if field in _TIMESTAMPS else systems.c[field]
        for field in SystemView._fields
    ]


_STORED_TIMES: dict[str, bool] = {}


def _stored_times(dialect: Dialect) -> bool:
    """Whether this database's rows bring `api_time` values as stored, for the reader to cut
    (SQLite), not formatted by the database (PostgreSQL)."""
    stored = _STORED_TIMES.get(dialect.name)
    if stored is None:
        processor = api_time.type.dialect_impl(dialect).result_processor(dialect, None)
        stored = _STORED_TIMES[dialect.name] = processor is not None
    return stored


async def page_of_items(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    status: SystemStatus | None,
    market_zone: str | None,
    offset: int,
    limit: int,
) -> tuple[list[dict[str, object]], int]:
    """A page of the environment's systems as the contract's objects (ordered by
    `created_at`, `id`) and their total, read in one statement straight through the driver
    and rendered from its rows (`views.listed_items`: no ORM object, no view, no converted
    column, no datetime per timestamp; before any transaction a lone read)."""
    shape = (status is not None, market_zone is not None)
    params = {
        "account_id": account_id,
        "environment": environment,
        "status": status,
        "market_zone": market_zone,
        "limit": limit,
        "offset": offset,
    }
    keys_first = session_backend(session).projects_skipped_rows
    rows = await _page_query(*shape, keys_first).raw(session, params)
    if rows:
        stored_times = _stored_times(session.get_bind().dialect)
        return listed_items(rows, stored_times=stored_times), int(rows[0][0])
    # No row: none match (at offset 0), or the page is past the end and the total is read
    # alone.
    if offset == 0:
        return [], 0
    counted = await _count_query(*shape).first(session, params)
    return [], int(counted[0]) if counted else 0


async def list_for_account(
    session: AsyncSession, account_id: str, environment: Environment
) -> Sequence[System]:
    rows = await session.scalars(
        select(System)
        .where(System.account_id == account_id, System.environment == environment)
        .order_by(System.created_at, System.id)
    )
    return rows.all()


async def add(session: AsyncSession, system: System) -> None:
    session.add(system)
    await session.flush()


async def delete_system(session: AsyncSession, system: System) -> None:
    # Explicit deletes instead of relying on ON DELETE CASCADE alone: the ORM session would
    # otherwise not know, and SQLite enforces foreign keys only with a per-connection pragma.
    for table in (Reading, ReadingHour, ReadingDay, IrradianceReading, Alert, IngestToken):
        await session.execute(delete(table).where(table.system_id == system.id))
    await session.delete(system)
    await session.flush()


class FleetMember(NamedTuple):
    """The few columns of a system a fleet-wide read needs to place its rows (the portfolio
    readings): a record of every system of an environment costs more than the read. A
    NamedTuple made from its row in C (`_make`): a third of a frozen dataclass's time, which
    was ~0.6 ms of every portfolio request of 1,000 systems."""

    id: str
    timezone: str
    # As stored (plain strings, equal to the enums' members): converting two enum columns of
    # 1,000 rows through their SQLAlchemy processors cost ~10 % of a portfolio request.
    data_source: str
    status: str
    market_zone: str | None


_MEMBERS = DriverQuery(
    select(System.id, System.timezone, System.data_source, System.status, System.market_zone)
    .where(
        System.account_id == bindparam("account_id"),
        System.environment == bindparam("environment"),
    )
    .order_by(System.created_at, System.id)
)


async def members(
    session: AsyncSession, *, account_id: str, environment: Environment
) -> list[FleetMember]:
    """Every system of the environment as a `FleetMember`, ordered by `created_at`, `id`:
    one read through the driver."""
    rows = await _MEMBERS.raw(session, {"account_id": account_id, "environment": environment})
    return list(map(FleetMember._make, rows))


@functools.cache
def _matching_query(by_status: bool, by_zone: bool) -> DriverQuery:
    conditions = [
        System.account_id == bindparam("account_id"),
        System.environment == bindparam("environment"),
    ]
    if by_status:
        conditions.append(System.status == bindparam("status"))
    if by_zone:
        conditions.append(System.market_zone == bindparam("market_zone"))
    return DriverQuery(
        select(*SYSTEM_COLUMNS).where(*conditions).order_by(System.created_at, System.id)
    )


async def matching_records(
    session: AsyncSession,
    *,
    account_id: str,
    environment: Environment,
    status: str | None,
    market_zone: str | None,
    system_ids: Sequence[str] | None,
) -> list[SystemRecord]:
    """Every system of the environment that matches the filters, as records, ordered by
    `created_at`, `id`: one read through the driver (the portfolio endpoints; `system_ids`
    is applied to the environment's systems here, as `members` leaves it to its caller)."""
    query = _matching_query(status is not None, market_zone is not None)
    params = {"account_id": account_id, "environment": environment, "status": status,
              "market_zone": market_zone}  # fmt: skip
    found = [record(row) for row in await query.all(session, params)]
    if system_ids is None:
        return found
    wanted = set(system_ids)
    return [system for system in found if system.id in wanted]
