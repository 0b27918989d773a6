"""Operator commands of the readings area, registered on the `solarapi` command."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from solarapi.cli_support import load_settings, print_json
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for
from solarapi.kit.timefmt import utcnow
from solarapi.readings.csvfile import CsvRowError, read_batches, store_batch
from solarapi.readings.jobs import maintain_partitions
from solarapi.readings.partitions import Maintenance
from solarapi.systems import repository as systems_repo

readings_app = typer.Typer(help="Readings of metered systems.", no_args_is_help=True)


@dataclass
class ImportTotals:
    received: int = 0
    inserted: int = 0
    updated: int = 0
    batches: int = 0
    errors: list[str] = field(default_factory=list)


_PROGRESS = Console(stderr=True)


async def import_file(settings: Settings, system_id: str, path: Path) -> ImportTotals:
    """Stream `path` into the system in batches of 10,000, one transaction per batch."""

    totals = ImportTotals()
    engine = create_oneshot_engine(settings)
    maker = sessionmaker_for(engine)
    columns = (
        TextColumn("importing"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[rows]:,} rows"),
        TimeRemainingColumn(),
    )
    try:
        async with maker() as session:
            if await systems_repo.get(session, system_id) is None:
                raise CsvRowError(f"no system with id '{system_id}'")
        with (
            # utf-8-sig: a byte-order mark (as spreadsheets write one) is not part of the header.
            path.open(newline="", encoding="utf-8-sig") as stream,
            # On stderr, and only on a terminal: stdout holds the summary alone (a piped run
            # printed an empty line before it: the finished bar's).
            Progress(
                *columns, transient=True, console=_PROGRESS, disable=not _PROGRESS.is_terminal
            ) as progress,
        ):
            task = progress.add_task("import", total=os.fstat(stream.fileno()).st_size, rows=0)
            batches = read_batches(stream, lambda size: progress.advance(task, size))
            for lines, items in batches:
                async with maker() as session, session.begin():
                    system = await systems_repo.get(session, system_id)
                    if system is None:
                        raise CsvRowError(f"no system with id '{system_id}'")
                    result = await store_batch(session, system, lines, items, utcnow())
                totals.received += result.received
                totals.inserted += result.inserted
                totals.updated += result.updated
                totals.batches += 1
                progress.update(task, rows=totals.received)
    except CsvRowError as exc:
        totals.errors.append(str(exc))
    finally:
        await dispose_engine(engine)
    return totals


@readings_app.command("import")
def import_command(
    system_id: Annotated[str, typer.Argument(help="sys_… id of a metered system")],
    file: Annotated[
        Path,
        typer.Argument(
            help="CSV with header timestamp,energy_wh[,power_w]; timestamps RFC 3339 with zone",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Import 15-minute readings, streamed in batches of 10,000 through the same validation
    and upsert as the API. Each batch is all or nothing; an error stops the import, names
    the line, and keeps the batches before it."""

    started = time.perf_counter()
    totals = asyncio.run(import_file(load_settings(), system_id, file))
    elapsed = time.perf_counter() - started
    summary = {
        "system_id": system_id,
        "received": totals.received,
        "inserted": totals.inserted,
        "updated": totals.updated,
        "batches": totals.batches,
        "seconds": round(elapsed, 2),
        "error": totals.errors[0] if totals.errors else None,
    }
    if as_json:
        print_json(summary)
    else:
        typer.echo(
            f"{totals.received:,} readings imported into {system_id} in {totals.batches} "
            f"batch(es): {totals.inserted:,} inserted, {totals.updated:,} updated "
            f"({elapsed:.1f} s)"
        )
    if totals.errors:
        typer.echo(
            f"error: {totals.errors[0]} (nothing of that batch was stored; "
            f"{totals.received:,} readings before it were)",
            err=True,
        )
        raise typer.Exit(1)


async def _maintain(settings: Settings) -> Maintenance:
    engine = create_oneshot_engine(settings)
    try:
        maker = sessionmaker_for(engine, settings)
        return await maintain_partitions(maker, utcnow(), settings.readings_retention_months)
    finally:
        await dispose_engine(engine)


@readings_app.command("partitions")
def partitions_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Run the daily partition maintenance now (PostgreSQL): months ahead, months for
    history in the default partition (after a backfill), retention. On SQLite only retention
    applies."""
    done = asyncio.run(_maintain(load_settings()))
    summary = {
        "created": list(done.created),
        "dropped": list(done.dropped),
        "moved_rows": done.moved_rows,
        "purged_rows": done.purged_rows,
    }
    if as_json:
        print_json(summary)
    else:
        typer.echo(
            f"created {', '.join(done.created) or 'no partition'}; "
            f"dropped {', '.join(done.dropped) or 'none'}; "
            f"{done.moved_rows:,} row(s) moved out of the default partition, "
            f"{done.purged_rows:,} past retention removed"
        )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.add_typer(readings_app, name="readings")
