"""SQL for erasing an account: every row tied to it, found through the schema's foreign keys.

The rows to erase are derived from the tables themselves (`Base.metadata`), not listed by
hand: a row belongs to the account when a foreign key leads from it, through any chain of
foreign keys, to the account's row. A table added later by another area is erased with the
account without a change here, as long as its rows reference their owner by foreign key — or
name it on the column (`info={"owner": "systems.id"}`), where a foreign key was dropped for
its cost per row (the readings tables, migration 0019).
What is not tied by a key (queued jobs, whose payload names the objects they work on) is
found by the ids those rows hold.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    Column,
    ColumnElement,
    String,
    Table,
    bindparam,
    delete,
    or_,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import TypeEngine

from solarapi.models import Account, Base
from solarapi.models.jobs import Job
from solarapi.models.reports import Report

_ACCOUNT: BindParameter[str] = bindparam("account_id", type_=String())


@dataclass(frozen=True, slots=True)
class _Owned:
    table: Table
    # True for a row of `table` that belongs to the account `account_id` (a bound parameter).
    belongs: ColumnElement[bool]


@functools.cache
def _owned_tables() -> tuple[_Owned, ...]:
    """Every table with rows tied to an account, parents before children (the account's own
    table first)."""
    accounts = Account.__table__
    assert isinstance(accounts, Table)
    belongs: dict[Table, ColumnElement[bool]] = {accounts: accounts.c.id == _ACCOUNT}
    for table in Base.metadata.sorted_tables:
        if table is accounts:
            continue
        paths = [
            column.in_(select(owner).where(belongs[owner.table]))
            for column, owner in _references(table)
            if owner.table in belongs
        ]
        if paths:
            belongs[table] = or_(*paths)
    return tuple(_Owned(table, condition) for table, condition in belongs.items())


def _references(table: Table) -> list[tuple[Column[Any], Column[Any]]]:
    """(column, the column it refers to) for each foreign key of `table`, and for each column
    that names its owner without a constraint (`info["owner"]`, "table.column": the readings
    tables, whose writers hold the owner's lock instead, models.readings), by column name."""
    references: list[tuple[Column[Any], Column[Any]]] = [
        (fk.parent, fk.column) for fk in table.foreign_keys
    ]
    for column in table.columns:
        owner = column.info.get("owner")
        if owner is not None:
            owner_table, owner_column = str(owner).split(".")
            references.append((column, Base.metadata.tables[owner_table].c[owner_column]))
    return sorted(references, key=lambda pair: pair[0].name)


async def owned_ids(session: AsyncSession, account_id: str) -> set[str]:
    """The ids of the account's rows in every table keyed by one text id (systems, keys,
    reports, webhook endpoints, events, …): what a job's payload may name."""
    ids: set[str] = set()
    for owned in _owned_tables():
        key = list(owned.table.primary_key.columns)
        if len(key) != 1 or not _is_text(key[0].type):
            continue
        rows = await session.execute(
            select(key[0]).where(owned.belongs), {"account_id": account_id}
        )
        ids.update(str(value) for (value,) in rows)
    return ids


def _is_text(column_type: TypeEngine[object]) -> bool:
    try:
        return column_type.python_type is str
    except NotImplementedError:
        return False


async def report_files(session: AsyncSession, account_id: str) -> list[str]:
    rows = await session.scalars(
        select(Report.file_name).where(
            Report.account_id == account_id, Report.file_name.is_not(None)
        )
    )
    return [name for name in rows if name]


async def jobs_naming(session: AsyncSession, ids: Collection[str]) -> list[str]:
    """Jobs (of any status) whose payload names one of `ids`. The payload is JSON on both
    databases with no common way to search it, so it is read and matched here; the table
    holds queued jobs and 30 days of finished ones."""
    if not ids:
        return []
    found = []
    for job_id, payload in await session.execute(select(Job.id, Job.payload)):
        if any(isinstance(value, str) and value in ids for value in (payload or {}).values()):
            found.append(job_id)
    return found


async def delete_jobs(session: AsyncSession, job_ids: Sequence[str]) -> int:
    if not job_ids:
        return 0
    result = await session.execute(delete(Job).where(Job.id.in_(job_ids)))
    return int(getattr(result, "rowcount", 0) or 0)


async def erase_account(session: AsyncSession, account_id: str) -> dict[str, int]:
    """Delete the account's rows from every table tied to it, children first (so no foreign
    key's ON DELETE rule is relied on); returns the rows deleted per table."""
    counts: dict[str, int] = {}
    for owned in reversed(_owned_tables()):
        result = await session.execute(
            delete(owned.table).where(owned.belongs), {"account_id": account_id}
        )
        deleted = int(getattr(result, "rowcount", 0) or 0)
        if deleted:
            counts[str(owned.table.name)] = deleted
    return counts
