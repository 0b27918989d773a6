"""A report's systems are read in one query when it is requested and one when it is
generated, however many it names (they were read one SELECT per id, then again by each
source service)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.engine import Engine

from solarapi.reports import jobs as report_jobs
from tests.reports.helpers import (
    JUNE_1,
    completed,
    create_report,
    in_thread,
    make_system,
    upload_readings,
)
from tests.support import Tenant, client_for

PERIOD = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-03T00:00:00Z", "interval": "1d"}


@contextmanager
def system_reads() -> Iterator[list[str]]:
    """The statements that read the systems table, on every engine of this process."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        flat = " ".join(statement.split()).lower()
        if flat.startswith("select") and " from systems" in flat:
            seen.append(flat)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


@pytest.mark.parametrize("kind", ["production", "market_value"])
async def test_a_reports_systems_are_read_once_per_step(
    app: FastAPI, enterprise: Tenant, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # Generation in this process, so its statements are seen here too.
    monkeypatch.setattr(report_jobs, "run_in_process", in_thread)
    async with client_for(app, enterprise.live) as client:
        systems = [
            await make_system(client, f"Roof {i}", "Europe/Amsterdam", 5.0, "NL") for i in range(6)
        ]
        for system in systems[:2]:
            await upload_readings(client, system, JUNE_1, 96 * 2)
        ids = [system["id"] for system in systems]
        with system_reads() as at_post:
            report = await create_report(client, type=kind, format="csv", system_ids=ids, **PERIOD)
        with system_reads() as at_generation:
            done = await completed(client, app, report["id"])
        with system_reads() as at_download:
            download = await client.get(done["download_url"])
    assert download.status_code == 200
    assert len(at_post) == 1, at_post
    assert " in (" in at_post[0]  # one query for the six ids
    assert len(at_generation) == 1, at_generation
    assert at_download == []  # the calendar is stored: the file name needs no system
