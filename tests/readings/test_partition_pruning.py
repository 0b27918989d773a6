"""Every statement the app runs against the partitioned `readings` and `change_batches`
(PostgreSQL) reads only the months of its window: the plans PostgreSQL actually ran, as the
app ran them (prepared statements, generic or custom plans), recorded by `auto_explain`
while the endpoints that read or write readings are exercised.

`auto_explain` is loaded into every session of the test's scratch database
(`session_preload_libraries`) and sends each executed statement's plan to the client as a
NOTICE; a listener on every asyncpg connection of the app's pool collects them. A plan lists
only the partitions left after pruning (at planning, or when a prepared statement's generic
plan starts), so the partitions it names are those the statement reads.

The statements that have no time bound read every month, by their nature; they are named
here (the test fails if another joins them): the change feed (ordered by its log position,
not by time), a system's reading span (after a time-zone change) and deleting a system."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool

from solarapi.alerts import detectors
from solarapi.alerts.service import evaluate_system
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, sessionmaker_for
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from solarapi.readings.jobs import maintain_partitions
from solarapi.readings.partitions import month_start, month_table
from tests.support import (
    TEST_SECRET,
    TestClock,
    admin,
    client_for,
    database_url,
    make_tenant,
    need_service,
    postgres_available,
    running_app,
    scratch_database,
)

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
# Partitions of both tables: September 2026 to February 2027 and the default ones.
MONTHS = [month_start(datetime(2026, 9, 1, tzinfo=UTC), n) for n in range(6)]
_PARTITION = re.compile(r"^(batches_)?(m\d{4}_\d{2}|outside_every_month|before_cut_over)$")


def months(*starts: datetime) -> set[str]:
    """The partitions of both tables for the months of `starts`."""
    names = {month_table(month_start(start)) for start in starts}
    return names | {f"batches_{name}" for name in names}


EVERY = months(*MONTHS) | {"outside_every_month", "batches_outside_every_month"}


@dataclass
class Plans:
    """The plans of the statements the app executed, by phase."""

    seen: list[tuple[str, str, set[str]]] = field(default_factory=list)  # phase, query, parts
    phase: str = "setup"

    def add(self, message: str) -> None:
        _, _, body = message.partition("plan:\n")
        if not body:
            return
        plan: dict[str, Any] = json.loads(body)
        text = json.dumps(plan["Plan"])
        names = set(re.findall(r'"Relation Name": "(\w+)"', text))
        self.seen.append(
            (self.phase, plan["Query Text"], {n for n in names if _PARTITION.match(n)})
        )

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        self.phase = phase
        yield
        self.phase = "between"

    def of(self, phase: str) -> list[tuple[str, set[str]]]:
        return [(query, parts) for name, query, parts in self.seen if name == phase and parts]


@pytest.fixture
async def pg(tmp_path: Path) -> AsyncIterator[Settings]:
    need_service("PostgreSQL", postgres_available())
    async with scratch_database() as name:
        yield Settings(data_dir=tmp_path, database_url=database_url(name), secret_key=TEST_SECRET)


@pytest.fixture
def plans() -> Iterator[Plans]:
    """Every plan `auto_explain` sends to any pooled asyncpg connection opened meanwhile."""
    collected = Plans()

    def listen(dbapi_connection: Any, record: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if driver is not None and hasattr(driver, "add_log_listener"):
            driver.add_log_listener(lambda _connection, message: collected.add(message.message))

    event.listen(Pool, "connect", listen)
    try:
        yield collected
    finally:
        event.remove(Pool, "connect", listen)


async def _prepare(settings: Settings) -> None:
    await asyncio.to_thread(upgrade, settings)
    engine = create_oneshot_engine(settings)
    try:
        maker = sessionmaker_for(engine, settings)
        # The fresh install's empty cut-over table goes; months from September 2026 on.
        await maintain_partitions(maker, MONTHS[0], None)
        await maintain_partitions(maker, NOW, None)
    finally:
        await engine.dispose()
    name = settings.database_url.rsplit("/", 1)[1]
    for setting in (
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_format = 'json'",
        "auto_explain.log_level = 'notice'",
    ):
        await admin(f'ALTER DATABASE "{name}" SET {setting}')


def _quarter_hours(start: datetime, end: datetime, energy: float = 100.0) -> list[dict[str, Any]]:
    count = int((end - start).total_seconds()) // 900
    return [
        {
            "timestamp": (start + timedelta(minutes=15 * n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "energy_wh": energy,
            "power_w": energy * 4,
        }
        for n in range(count)
    ]


def _pruned(plans: Plans, phase: str, allowed: set[str]) -> int:
    """Every statement of `phase` that read partitions read only `allowed` ones; how many."""
    found = plans.of(phase)
    for query, parts in found:
        assert parts <= allowed, f"{phase}: {sorted(parts - allowed)} read by\n{query}"
    return len(found)


@pytest.mark.services
async def test_every_statement_on_readings_reads_only_the_months_of_its_window(
    pg: Settings, plans: Plans
) -> None:
    await _prepare(pg)
    clock = TestClock()
    clock.pinned = NOW.timestamp()
    oct25, nov = datetime(2026, 10, 25, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
    nov2, nov4 = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)
    nov5, nov6 = datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 11, 6, tzinfo=UTC)
    window = {"from": "2026-11-02T00:00:00Z", "to": "2026-11-04T00:00:00Z"}
    counts: dict[str, int] = {}
    async with running_app(pg, clock) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            created = await client.post(
                "/api/v1/systems",
                json={
                    "name": "P",
                    "capacity_kwp": 10,
                    "location": {"latitude": 52, "longitude": 5, "timezone": "Europe/Amsterdam"},
                },
            )
            system = created.json()["id"]
            path = f"/api/v1/systems/{system}/readings"

            async def upload(rows: list[dict[str, Any]]) -> None:
                response = await client.post(path, json={"readings": rows})
                assert response.status_code == 200, response.text

            # Uploads: a large new batch (COPY) over two months, a small new one after it
            # (one statement), and replacements of stored quarter-hours (the general way).
            with plans.during("upload October–November"):
                await upload(_quarter_hours(oct25, nov5))
            with plans.during("upload November"):
                await upload(_quarter_hours(nov5, nov6))
                await upload(_quarter_hours(nov2, nov2 + timedelta(hours=6), 50.0))
            with plans.during("read November"):
                for interval in ("15m", "30m", "1h", "1d", "1w", "1M"):
                    read = await client.get(path, params={**window, "interval": interval})
                    assert read.status_code == 200, read.text
                for interval in ("15m", "1d"):
                    fleet = await client.get(
                        "/api/v1/portfolio/readings", params={**window, "interval": interval}
                    )
                    assert fleet.status_code == 200, fleet.text
                performance = await client.get(
                    f"/api/v1/systems/{system}/performance",
                    params={"from": "2026-11-02T00:00:00Z", "to": "2026-11-05T00:00:00Z"},
                )
                assert performance.status_code == 200, performance.text
            with plans.during("latest reading"):
                for url in (f"/api/v1/systems/{system}/summary", "/api/v1/portfolio/summary"):
                    summary = await client.get(url)
                    assert summary.status_code == 200, summary.text
            with plans.during("change feed"):
                feed = await client.get("/api/v1/readings/changes", params={"limit": "100"})
                assert feed.status_code == 200, feed.text
            with plans.during("alerts"):
                async with app.state.sessionmaker() as session, session.begin():
                    await evaluate_system(session, system, NOW)
            with plans.during("time zone"):
                moved = await client.patch(
                    f"/api/v1/systems/{system}",
                    json={"location": {"latitude": 52, "longitude": 5, "timezone": "Asia/Tokyo"}},
                )
                assert moved.status_code == 200, moved.text
            with plans.during("delete"):
                gone = await client.delete(f"/api/v1/systems/{system}")
                assert gone.status_code == 204, gone.text

    for phase, query, parts in plans.seen:  # shown with -s or on failure
        print(f"{phase} | {sorted(parts)} | {' '.join(query.split())[:300]}")
    counts["upload"] = _pruned(plans, "upload October–November", months(oct25, nov))
    counts["upload"] += _pruned(plans, "upload November", months(nov))
    counts["read"] = _pruned(plans, "read November", months(nov2, nov4))
    # Bounded below by the system's stored last reading (5 November): that month and those
    # after it (nothing says they are empty), never the months before.
    after_last = months(*MONTHS[2:]) | {"outside_every_month", "batches_outside_every_month"}
    counts["latest"] = _pruned(plans, "latest reading", after_last)
    since = NOW - timedelta(days=detectors.HISTORY_DAYS)
    counts["alerts"] = _pruned(plans, "alerts", months(since, NOW) | months(nov))
    assert all(counts.values()), counts  # every phase read partitions

    # Without a time bound, every month: exactly these statements.
    unbounded = [
        (phase, query)
        for phase in ("change feed", "time zone", "delete")
        for query, parts in plans.of(phase)
        if not parts <= months(oct25, nov)
    ]
    for phase, query in unbounded:
        assert any(
            pattern in query
            for pattern in (
                "FROM change_batches b CROSS JOIN LATERAL",  # the feed: by log position
                "SELECT min(readings.start_s) AS min_1, max(readings.start_s)",  # reading_span
                "DELETE FROM readings",  # a deleted system's readings
                "DELETE FROM change_batches",
            )
        ), f"{phase}: reads every month\n{query}"
    assert {phase for phase, _ in unbounded} == {"change feed", "time zone", "delete"}
