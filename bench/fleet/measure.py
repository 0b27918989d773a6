"""A thin driver of the fleet benchmark — the side-by-side script that measures this project
against a naive FastAPI + SQLAlchemy peer and a floor on uncached requests (kept outside this
repository: pass its folder, the one holding its `build.py` and `run.py`, as FLEET_DIR). It
runs the benchmark's own build and run on SQLite and on PostgreSQL with the same settings,
writes each run's JSON results and log beside the load average before and after, and on
PostgreSQL measures what a stored quarter-hour costs on disk (`sizes`).

    FLEET_DIR=<fleet> .venv/bin/python bench/fleet/measure.py [sqlite] [postgres]
    .venv/bin/python bench/fleet/measure.py sizes <postgresql URL>

Settings (environment): the benchmark's own (SYSTEMS, DAYS, ROUNDS, SECS, WORKLOADS, …,
see its README) pass through; OUT (default /tmp/fleet-results) is where results go;
PORT_BASE defaults to 9340 here, so a run does not collide with another on the benchmark's
default ports; REUSE=1 runs again on the fleet an earlier build left (SQLite's file, or a
PostgreSQL database kept with KEEP=1). PostgreSQL: SOLARAPI_TEST_POSTGRES_URL's server (default
postgresql://postgres@127.0.0.1:5432/test), database `fleet_ingest34`, dropped at the end
unless KEEP=1.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = os.environ.get("SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

# Bytes of everything a stored quarter-hour costs: the readings (all partitions), its share of
# the hourly and daily rollups, and its row in the change feed's log; each table's heap,
# indexes and TOAST (`pg_total_relation_size`).
SIZES_SQL = """
WITH parts AS (
    SELECT c.oid FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'readings'::regclass
), stored AS (
    SELECT coalesce(sum(pg_relation_size(oid)), 0) AS heap,
           coalesce(sum(pg_total_relation_size(oid)), 0) AS total FROM parts
)
SELECT (SELECT count(*) FROM readings) AS quarter_hours,
       (SELECT heap FROM stored), (SELECT total FROM stored),
       pg_total_relation_size('reading_hours'), (SELECT count(*) FROM reading_hours),
       pg_total_relation_size('reading_days'), (SELECT count(*) FROM reading_days),
       (SELECT coalesce(sum(pg_total_relation_size(relid)), 0)
        FROM pg_partition_tree('change_batches'))  -- the change log since migration 0021
"""


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sizes(url: str) -> str:
    subprocess.run(["psql", url, "-qc", "VACUUM ANALYZE"], check=True)
    out = subprocess.run(
        ["psql", url, "-AtF", " ", "-c", SIZES_SQL], check=True, capture_output=True, text=True
    ).stdout.split()
    n, heap, total, hours, hour_rows, days, day_rows, changes = (int(v) for v in out)
    lines = [
        f"quarter-hours stored: {n:,}; hourly rows {hour_rows:,}; daily rows {day_rows:,}",
        f"readings: heap {heap / n:.1f} B, heap + primary key {total / n:.1f} B per quarter-hour",
        f"reading_hours: {hours / n:.1f} B per quarter-hour ({hours / max(hour_rows, 1):.1f} B a row)",
        f"reading_days: {days / n:.1f} B per quarter-hour ({days / max(day_rows, 1):.1f} B a row)",
        f"change_batches (change feed log): {changes / n:.1f} B per quarter-hour",
        f"all: {(total + hours + days + changes) / n:.1f} B per quarter-hour "
        f"({(total + hours + days) / n:.1f} without the change log)",
    ]
    return "\n".join(lines)


def settle(env: dict[str, str], url: str | None, sink: IO[str]) -> None:
    """Before measuring a fresh fleet: run the alert evaluations its build queued (one per
    upload, ~1,000; left queued, the project's inline runner works through them during the
    first measurements, ~10 ms of CPU each), and on PostgreSQL give the planner statistics
    (`VACUUM ANALYZE`: a server with autovacuum off, as CI machines may run, never does)."""
    sink.write(f"== solarapi worker --once, load average {load_average()} at {time.ctime()}\n")
    sink.flush()
    subprocess.run(
        [sys.executable, "-m", "solarapi", "worker", "--once"],
        cwd=ROOT, env={**env, "SOLARAPI_LOG_LEVEL": "WARNING"}, stdout=subprocess.DEVNULL,
        stderr=sink, check=True,
    )  # fmt: skip
    if url is not None:
        subprocess.run(["psql", url, "-qc", "VACUUM ANALYZE"], check=True)


def run(database: str, fleet: Path, out: Path) -> None:
    env = dict(os.environ)
    env.setdefault("PORT_BASE", "9340")
    data = out / f"data-{database}"
    data.mkdir(parents=True, exist_ok=True)
    env["SOLARAPI_DATA_DIR"] = str(data)
    url = None
    if database == "sqlite":
        env["SOLARAPI_DATABASE_URL"] = f"sqlite:///{data}/fleet.db"
    else:
        url = PG_ADMIN.rsplit("/", 1)[0] + "/fleet_ingest34"
        env["SOLARAPI_DATABASE_URL"] = url
        env.setdefault("SOLARAPI_SECRET_KEY", secrets.token_urlsafe(48))
    env["RESULTS"] = str(out / f"{database}.json")
    log = out / f"{database}.log"
    if os.environ.get("REUSE") == "1":  # the fleet of an earlier build, kept (KEEP=1 / SQLite)
        log = out / f"{database}-again.log"
    with log.open("w") as sink:

        def step(script: str, **extra: str) -> None:
            sink.write(f"== {script} {extra} load average {load_average()} at {time.ctime()}\n")
            sink.flush()
            subprocess.run(
                [sys.executable, str(fleet / script)],
                cwd=ROOT, env={**env, **extra}, stdout=sink, stderr=subprocess.STDOUT, check=True,
            )  # fmt: skip
            sink.write(f"== done, load average {load_average()} at {time.ctime()}\n")
            sink.flush()

        if os.environ.get("REUSE") != "1":
            step("build.py", REBUILD="1")
            settle(env, url, sink)
        step("run.py")
        if url is not None:
            sink.write(sizes(url) + "\n")
            if os.environ.get("KEEP") != "1":
                step("build.py", DROP="1")
    print(log.read_text())


def main() -> None:
    if sys.argv[1:2] == ["sizes"]:
        print(sizes(sys.argv[2]))
        return
    fleet = Path(os.environ["FLEET_DIR"]).resolve()
    out = Path(os.environ.get("OUT", "/tmp/fleet-results"))
    out.mkdir(parents=True, exist_ok=True)
    for database in sys.argv[1:] or ["sqlite", "postgres"]:
        run(database, fleet, out)


if __name__ == "__main__":
    main()
