"""Build a large PostgreSQL readings database through the product's bulk path.

    .venv/bin/python bench/scale/build.py [--database solar_scale] [--systems 2000]
        [--jobs 2] [--until 22:40] [--rebuild]

Each system gets one year (2024, 35,136 quarter-hours) of a synthetic day curve, written
exactly as the import command (`solarapi readings import`) and an upload write it: batches of
10,000 quarter-hours, one transaction each (the system locked by it), through
`readings.upload.store_series` — the product's bulk insert (`INSERT … SELECT unnest`) plus the
hourly and local-daily rollups it keeps in the same transaction. No HTTP (its cost per row is
measured by `bench/readings`), no CSV parsing, no hand-written SQL.

The build is resumable: systems are named `Bench scale NNNNN`, a system's progress is its
`last_reading_at`, and a re-run continues where the last one stopped. `--until HH:MM` (UTC)
stops cleanly at that time, so a long build can be measured at the size it reached.
`--jobs` concurrent builders (one pooled connection each) keep the client's Python and the
server's work overlapping on a small machine.

Progress goes to stdout, one line per 10 systems: systems, rows, rows/s since the start.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent.parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "readings"))

from bench_readings import TZ, synthetic_day

from harness import PG_ADMIN, SECRET
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.kit.timefmt import utcnow
from solarapi.migrate import upgrade

YEAR_START = datetime(2024, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2025, 1, 1, tzinfo=UTC)
BATCH = 10_000  # readings.upload.MAX_UPLOAD and the import command's batch
NAME = "Bench scale {:05d}"


def database_url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"


def psql(url: str, sql: str) -> str:
    return subprocess.run(
        ["psql", url, "-tAqc", sql], check=True, capture_output=True, text=True
    ).stdout.strip()


def ensure_database(name: str, rebuild: bool) -> Settings:
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"unsafe database name {name!r}")
    exists = psql(PG_ADMIN, f"SELECT 1 FROM pg_database WHERE datname = '{name}'") == "1"  # noqa: S608
    if rebuild and exists:
        psql(PG_ADMIN, f'DROP DATABASE "{name}" WITH (FORCE)')
        exists = False
    if not exists:
        psql(PG_ADMIN, f'CREATE DATABASE "{name}"')
    data_dir = Path("/tmp") / f"bench-scale-{name}"
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(data_dir=data_dir, secret_key=SECRET, database_url=database_url(name))
    upgrade(settings)
    return settings


class Builder:
    def __init__(self, settings: Settings, systems: int, jobs: int, deadline: float | None):
        from solarapi.db import create_engine, sessionmaker_for

        self.engine = create_engine(settings.model_copy(update={"db_pool_size": jobs}))
        self.maker = sessionmaker_for(self.engine)
        self.systems = systems
        self.jobs = jobs
        self.deadline = deadline
        self.starts = np.arange(
            int(YEAR_START.timestamp()), int(YEAR_END.timestamp()), 900, dtype=np.int64
        )
        self.rows = 0
        self.done = 0
        self.began = time.perf_counter()

    async def owner(self) -> str:
        from sqlalchemy import select

        from solarapi.accounts.service import create_account
        from solarapi.models.systems import System

        async with self.maker() as session, session.begin():
            account_id = await session.scalar(
                select(System.account_id).where(System.name.like("Bench scale %")).limit(1)
            )
            if account_id is not None:
                return str(account_id)
            created = await create_account(
                session, name="Bench scale data",
                email=f"bench-scale-{uuid.uuid4().hex[:8]}@example.com",
                password="bench password 123", plan=Plan.PRO, now=utcnow(),
            )  # fmt: skip
            return created.account.id

    async def progress(self) -> dict[str, datetime | None]:
        from sqlalchemy import select

        from solarapi.models.systems import System

        async with self.maker() as session:
            rows = await session.execute(
                select(System.name, System.last_reading_at).where(System.name.like("Bench scale %"))
            )
            return dict(rows.all())

    async def system(self, number: int, owner: str, last: datetime | None, known: bool) -> None:
        from sqlalchemy import select

        from solarapi.kit.ids import new_id
        from solarapi.models.systems import System
        from solarapi.readings.upload import store_series
        from solarapi.systems import repository as systems_repo

        name = NAME.format(number)
        if not known:
            async with self.maker() as session, session.begin():
                now = utcnow()
                system = System(
                    id=new_id("sys"), account_id=owner, environment="live", name=name,
                    status="active", data_source="metered", capacity_kwp=10.0,
                    latitude=52.0, longitude=5.0, timezone=TZ, tilt_deg=30.0,
                    azimuth_deg=180.0, created_at=now, updated_at=now,
                )  # fmt: skip
                session.add(system)
        async with self.maker() as session:
            system_id = await session.scalar(select(System.id).where(System.name == name))
        assert system_id is not None
        first = 0 if last is None else int(np.searchsorted(self.starts, last.timestamp() + 900))
        energy = synthetic_day(self.starts, 10.0, number)
        power = energy * 4
        for lo in range(first, len(self.starts), BATCH):
            if self.deadline is not None and time.time() > self.deadline:
                return
            hi = lo + BATCH
            # As the import command does: one transaction per batch (store_series locks the
            # system for the exact rollup sums).
            async with self.maker() as session, session.begin():
                system = await systems_repo.get(session, system_id)
                assert system is not None
                await store_series(session, system, self.starts[lo:hi], energy[lo:hi], power[lo:hi])
            self.rows += len(self.starts[lo:hi])

    async def run(self) -> None:
        owner = await self.owner()
        known = await self.progress()
        final = datetime.fromtimestamp(int(self.starts[-1]), UTC)
        todo = []
        for number in range(self.systems):
            last = known.get(NAME.format(number))
            if last is not None and last >= final:
                continue
            todo.append((number, last, NAME.format(number) in known))
        already = self.systems - len(todo)
        print(f"{already} systems complete, {len(todo)} to build", flush=True)
        queue: asyncio.Queue[tuple[int, datetime | None, bool]] = asyncio.Queue()
        for item in todo:
            queue.put_nowait(item)

        async def worker() -> None:
            while not queue.empty():
                if self.deadline is not None and time.time() > self.deadline:
                    return
                number, last, exists = queue.get_nowait()
                await self.system(number, owner, last, exists)
                self.done += 1
                if self.done % 10 == 0:
                    elapsed = time.perf_counter() - self.began
                    print(f"{datetime.now(UTC):%H:%M:%S} built {already + self.done} systems; "
                          f"{self.rows:,} rows this run in {elapsed:,.0f} s = "
                          f"{self.rows / elapsed:,.0f} rows/s", flush=True)  # fmt: skip

        try:
            await asyncio.gather(*(worker() for _ in range(self.jobs)))
        finally:
            await self.engine.dispose()
        elapsed = time.perf_counter() - self.began
        print(f"{datetime.now(UTC):%H:%M:%S} stopped: {self.rows:,} rows this run in "
              f"{elapsed:,.0f} s = {self.rows / max(elapsed, 1e-9):,.0f} rows/s", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="solar_scale")
    parser.add_argument("--systems", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--until", help="HH:MM UTC: stop (cleanly, between batches) then")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--no-vacuum", action="store_true")
    args = parser.parse_args()
    deadline = None
    if args.until:
        hour, minute = (int(part) for part in args.until.split(":"))
        at = datetime.now(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
        if at < datetime.now(UTC):
            at += timedelta(days=1)
        deadline = at.timestamp()
    settings = ensure_database(args.database, args.rebuild)
    asyncio.run(Builder(settings, args.systems, args.jobs, deadline).run())
    if not args.no_vacuum:
        began = time.perf_counter()
        subprocess.run(["psql", database_url(args.database), "-qc", "VACUUM ANALYZE"], check=True)
        print(f"VACUUM ANALYZE in {time.perf_counter() - began:,.0f} s", flush=True)


if __name__ == "__main__":
    main()
