"""Report generation on the job runner, its failure hook and the clean-up of expired files.
(Imported by `jobs.runner.load_handlers`.)

An attempt: mark the report running → read the data → render the file in the CPU process
(`kit.cpu`: charts and PDF layout hold the GIL, so a thread would stall the API's event loop
in embedded mode) → hand it to the report storage (local disk, or an upload to object
storage) → in one transaction, check the job is still ours and mark the report completed
with the file's size and SHA-256, plus the `report.completed` event. A killed attempt leaves
at most an unreferenced file of its own name (`<report>-<attempt>.<ext>`), which is removed
by the next attempt's success path.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for
from solarapi.events.service import record_event
from solarapi.jobs.queue import (
    current_job,
    job_failure_handler,
    job_handler,
    lease_held,
    periodic_task,
    settings_of,
)
from solarapi.jobs.runner import ABANDONED_ERROR
from solarapi.kit.cpu import run_in_process
from solarapi.kit.timefmt import utcnow
from solarapi.metrics import recorder_for
from solarapi.models.reports import Report, ReportFormat
from solarapi.models.webhooks import EventType
from solarapi.reports import repository
from solarapi.reports.compose import build
from solarapi.reports.csvfile import write_csv
from solarapi.reports.document import ReportContent, ReportFailed
from solarapi.reports.pdffile import write_pdf
from solarapi.reports.service import (
    JOB_KIND,
    JOB_MAX_ATTEMPTS,
    RETENTION,
    report_to_api,
)
from solarapi.reports.storage import storage_for

log = logging.getLogger("solarapi.reports")
ORPHAN_AGE = timedelta(days=1)


def render(content: ReportContent, report_format: str, path: Path, now: datetime) -> None:
    if report_format == ReportFormat.CSV:
        write_csv(content, path)
    else:
        write_pdf(content, path, now)


def produce_file(
    settings: Settings, report_id: str, account_name: str, temporary: Path, now: datetime
) -> tuple[int, str] | None:
    """Read the report's data, shape it, render it into `temporary` and fsync it; returns
    (size, sha256), or None if the report was deleted meanwhile. Runs in the CPU process
    (`kit.cpu`), with its own connection: shaping 50 system-years into rows and laying out a
    PDF is pure Python that, on the API's event loop or a thread of it, stalled every request
    (a 0.9 s block building the rows, then seconds of drawing)."""
    content = asyncio.run(_content(settings, report_id, account_name, now))
    if content is None:
        return None
    report_format, built = content
    render(built, report_format, temporary, now)
    digest = hashlib.sha256()
    with temporary.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
        os.fsync(handle.fileno())
    return temporary.stat().st_size, digest.hexdigest()


async def _content(
    settings: Settings, report_id: str, account_name: str, now: datetime
) -> tuple[str, ReportContent] | None:
    engine = create_oneshot_engine(settings)
    try:
        async with sessionmaker_for(engine, settings)() as session:
            report = await repository.get(session, report_id)
            if report is None:
                return None
            return report.format, await build(session, report, account_name, now)
    finally:
        await dispose_engine(engine)


async def write_file(
    settings: Settings,
    report: Report,
    account_name: str,
    directory: Path,
    name: str,
    now: datetime,
) -> tuple[int, str] | None:
    """Produce the file in `directory` (the storage's staging directory) under a temporary
    name, then rename: a file under its final name is always complete. Cancelled meanwhile
    (its job was), the attempt drops its work: the rendering cannot be stopped, so its file
    is removed when it ends."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    temporary = directory / f".{name}.partial"
    rendering = asyncio.ensure_future(
        run_in_process(produce_file, settings, report.id, account_name, temporary, now)
    )
    try:
        written = await asyncio.shield(rendering)
    except asyncio.CancelledError:
        rendering.add_done_callback(lambda _: _drop(rendering, temporary))
        raise
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if written is not None:
        os.replace(temporary, directory / name)
    return written


def _drop(rendering: asyncio.Future[tuple[int, str] | None], temporary: Path) -> None:
    if not rendering.cancelled():
        rendering.exception()  # retrieved: nobody waits for it any more
    temporary.unlink(missing_ok=True)


@job_handler(JOB_KIND)
async def generate_report(maker: async_sessionmaker[AsyncSession], payload: dict[str, Any]) -> None:
    report_id = str(payload["report_id"])
    settings = settings_of(maker)
    storage = storage_for(settings)
    directory = storage.staging_dir
    started = time.perf_counter()
    job = current_job()
    attempt = job.attempt if job is not None else 1
    now = utcnow()
    async with maker() as session, session.begin():
        report = await repository.mark_running(session, report_id, now)
        if report is None:
            return  # deleted (cancelled) or already finished by an earlier attempt
        account = await repository.get_account(session, report.account_id)
        if account is None:
            return  # the account is gone; its reports went with it
    # Reading runs outside the write above (in the CPU process): on SQLite a long transaction
    # that has written would hold the database's one write lock for the whole read.
    name = f"{report.id}-{attempt}.{report.format}"
    written = await write_file(settings, report, account.name, directory, name, now)
    if written is None:
        return  # deleted while it was being produced
    size, sha256 = written
    completed = False
    try:
        content_type = ReportFormat(report.format).content_type
        await storage.save(name, directory / name, content_type)
        async with maker() as session, session.begin():
            if not await lease_held(session):
                log.warning("report %s: job lost its lease; discarding %s", report_id, name)
                return
            finished_at = utcnow()
            completed = await repository.mark_completed(
                session,
                report_id,
                now=finished_at,
                expires_at=finished_at + RETENTION,
                file_name=name,
                content_type=content_type,
                size_bytes=size,
                sha256=sha256,
            )
            if completed:
                done = await repository.get(session, report_id)
                assert done is not None
                await record_event(
                    session,
                    account_id=done.account_id,
                    environment=done.environment,
                    event_type=EventType.REPORT_COMPLETED,
                    data=report_to_api(done, finished_at),
                )
    finally:
        if not completed:
            (directory / name).unlink(missing_ok=True)
            await storage.delete(name)
    if completed:
        # Files of earlier, interrupted attempts of this report.
        for earlier in range(1, attempt):
            await storage.delete(f"{report_id}-{earlier}.{report.format}")
        metrics = recorder_for(settings)
        if metrics is not None:
            metrics.report_generated(report.type, report.format, time.perf_counter() - started)


def client_error(error: str, report_id: str) -> str:
    """What the report shows: our own message for a report that cannot be made as asked;
    nothing internal (exception names, SQL) for anything else."""
    prefix = f"{ReportFailed.__name__}: "
    if error.startswith(prefix):
        return error[len(prefix) :]
    if error == ABANDONED_ERROR:
        return (
            f"generation was interrupted {JOB_MAX_ATTEMPTS} times (the worker stopped); "
            "request the report again"
        )
    return (
        f"the report could not be generated because of an internal error ({JOB_MAX_ATTEMPTS} "
        f"attempts); request it again, or contact support quoting {report_id}"
    )


@job_failure_handler(JOB_KIND)
async def report_failed(session: AsyncSession, payload: dict[str, Any], error: str) -> None:
    report_id = str(payload["report_id"])
    if await repository.mark_failed(session, report_id, client_error(error, report_id)):
        report = await repository.get(session, report_id)
        assert report is not None
        await record_event(
            session,
            account_id=report.account_id,
            environment=report.environment,
            event_type=EventType.REPORT_FAILED,
            data=report_to_api(report, utcnow()),
        )


async def remove_expired_files(maker: async_sessionmaker[AsyncSession], now: datetime) -> int:
    """Delete the files of reports past `expires_at`; the report rows stay (they show the
    report existed and when it expired). Idempotent, so several runners may race. The files
    are deleted outside the transaction that forgets them: an object-storage round trip per
    file must not hold SQLite's write lock."""
    storage = storage_for(settings_of(maker))
    removed = 0
    while True:
        async with maker() as session:
            batch = await repository.expired_with_files(session, now)
        for _, file_name in batch:
            await storage.delete(file_name)
        async with maker() as session, session.begin():
            for report_id, _ in batch:
                await repository.forget_file(session, report_id, now)
        removed += len(batch)
        if len(batch) < 500:
            return removed


async def remove_orphan_files(maker: async_sessionmaker[AsyncSession], now: datetime) -> int:
    """Delete files no report refers to, once they are a day old: left by an attempt that was
    killed or cancelled while rendering, or by a report deleted in a transaction that then
    failed. The age keeps files of attempts still running out of reach."""
    storage = storage_for(settings_of(maker))
    cutoff = now - ORPHAN_AGE
    removed = await storage.sweep_staging(cutoff)
    old = await storage.names_older_than(cutoff)
    for first in range(0, len(old), 500):
        batch = old[first : first + 500]
        async with maker() as session:
            used = await repository.referenced_files(session, batch)
        for name in batch:
            if name not in used:
                await storage.delete(name)
                removed += 1
    return removed


@periodic_task("reports.remove_expired_files", every_seconds=600)
async def _remove_expired(maker: async_sessionmaker[AsyncSession], now: datetime) -> None:
    count = await remove_expired_files(maker, now)
    orphans = await remove_orphan_files(maker, now)
    if count or orphans:
        log.info("removed %d expired and %d orphaned report file(s)", count, orphans)
