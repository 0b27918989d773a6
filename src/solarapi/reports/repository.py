"""SQL of reports. Status changes are compare-and-set on the status they expect, so a report
finished by one attempt is never changed by another (or by a late, lease-less worker)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import session_backend
from solarapi.models.account import Account
from solarapi.models.reports import Report, ReportStatus
from solarapi.models.systems import System

_ACTIVE = (ReportStatus.QUEUED.value, ReportStatus.RUNNING.value)
_REPORTS = Report.metadata.tables[Report.__tablename__]


async def add(session: AsyncSession, report: Report) -> None:
    session.add(report)
    await session.flush()


async def get(session: AsyncSession, report_id: str) -> Report | None:
    return await session.get(Report, report_id, populate_existing=True)


async def get_owned(
    session: AsyncSession, account_id: str, environment: str, report_id: str
) -> Report | None:
    return (
        await session.execute(
            select(Report).where(
                Report.id == report_id,
                Report.account_id == account_id,
                Report.environment == environment,
            )
        )
    ).scalar_one_or_none()


async def list_page(
    session: AsyncSession,
    *,
    account_id: str,
    environment: str,
    status: str | None,
    report_type: str | None,
    offset: int,
    limit: int,
) -> tuple[Sequence[Report], int]:
    conditions = [Report.account_id == account_id, Report.environment == environment]
    if status is not None:
        conditions.append(Report.status == status)
    if report_type is not None:
        conditions.append(Report.type == report_type)
    total = await session.scalar(select(func.count()).select_from(Report).where(*conditions))
    rows = await session.scalars(
        select(Report)
        .where(*conditions)
        .order_by(Report.created_at.desc(), Report.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return rows.all(), int(total or 0)


async def get_account(session: AsyncSession, account_id: str) -> Account | None:
    return await session.get(Account, account_id)


async def mark_running(session: AsyncSession, report_id: str, now: datetime) -> Report | None:
    """Queued (or re-attempted running) → running; None when the report is gone or final."""
    result = await session.execute(
        update(Report)
        .where(Report.id == report_id, Report.status.in_(_ACTIVE))
        .values(
            status=ReportStatus.RUNNING,
            started_at=func.coalesce(Report.started_at, now),
        )
        .returning(Report.id)
        .execution_options(synchronize_session=False)
    )
    if result.first() is None:
        return None
    return await get(session, report_id)


async def mark_completed(
    session: AsyncSession,
    report_id: str,
    *,
    now: datetime,
    expires_at: datetime,
    file_name: str,
    content_type: str,
    size_bytes: int,
    sha256: str,
) -> bool:
    result = await session.execute(
        update(Report)
        .where(Report.id == report_id, Report.status == ReportStatus.RUNNING.value)
        .values(
            status=ReportStatus.COMPLETED,
            completed_at=now,
            expires_at=expires_at,
            file_name=file_name,
            content_type=content_type,
            size_bytes=size_bytes,
            sha256=sha256,
            error=None,
        )
        .returning(Report.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def mark_failed(session: AsyncSession, report_id: str, error: str) -> bool:
    result = await session.execute(
        update(Report)
        .where(Report.id == report_id, Report.status.in_(_ACTIVE))
        .values(status=ReportStatus.FAILED, error=error)
        .returning(Report.id)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None


async def delete_report(session: AsyncSession, report_id: str) -> None:
    await session.execute(
        delete(Report).where(Report.id == report_id).execution_options(synchronize_session=False)
    )


async def expired_with_files(
    session: AsyncSession, now: datetime, limit: int = 500
) -> Sequence[tuple[str, str]]:
    rows = await session.execute(
        select(Report.id, Report.file_name)
        .where(Report.expires_at <= now, Report.file_name.is_not(None))
        .limit(limit)
    )
    return [(row.id, row.file_name) for row in rows]


async def forget_file(session: AsyncSession, report_id: str, now: datetime) -> None:
    await session.execute(
        update(Report)
        .where(Report.id == report_id)
        .values(file_name=None, file_removed_at=now)
        .execution_options(synchronize_session=False)
    )


async def referenced_files(session: AsyncSession, names: Sequence[str]) -> set[str]:
    rows = await session.scalars(select(Report.file_name).where(Report.file_name.in_(names)))
    return {name for name in rows if name is not None}


async def system_timezones(session: AsyncSession, system_ids: Sequence[str]) -> set[str]:
    """The time zones of those of `system_ids` that still exist."""
    if not system_ids:
        return set()
    rows = await session.scalars(select(System.timezone).where(System.id.in_(list(system_ids))))
    return set(rows.all())


async def quota_counts(session: AsyncSession, account_id: str) -> tuple[int, int]:
    """(queued or running, completed with a file kept) reports of an account, counted under
    the account's report lock, held to the end of the transaction: two requests of one
    account at the same moment are counted one after the other, so the report the first
    adds is in the second's count and a quota is never exceeded."""
    await session_backend(session).hold_lock(session, f"reports.quota:{account_id}", _REPORTS)
    pending = Report.status.in_([ReportStatus.QUEUED.value, ReportStatus.RUNNING.value])
    kept = (Report.status == ReportStatus.COMPLETED.value) & Report.file_name.is_not(None)
    row = (
        await session.execute(
            select(func.count().filter(pending), func.count().filter(kept)).where(
                Report.account_id == account_id
            )
        )
    ).one()
    return int(row[0] or 0), int(row[1] or 0)
