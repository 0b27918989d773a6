"""Portfolio and change-feed benchmark against a real `solarapi serve` (one worker).

    # PostgreSQL: 1,000 systems × 365 days (35 M quarter-hours, their rollups and change log),
    # built with SQL (generate_series) in a database of its own, kept for later runs:
    .venv/bin/python bench/portfolio/run.py --postgres bench_portfolio --systems 1000 --days 365
    # SQLite: 1,000 systems × 31 days, built through the upload code path:
    .venv/bin/python bench/portfolio/run.py --sqlite /tmp/bench-portfolio --systems 1000 --days 31

A second run with the same database name (or directory) reuses the fleet; `--rebuild` makes
it anew. Measured, with the server's CPU-seconds from /proc/<pid>/stat (utime + stime of the
worker; PostgreSQL's backends separately), and the load average beside them:

1. `GET /portfolio/readings?interval=1d` over the last 31 days of the whole fleet (one request,
   `limit` 1,000): wall-time median and p95 over `--rounds` rounds, and the worker's CPU per
   request; against the fleet's `GET /systems/{id}/readings` for the same window, one per system
   (the same numbers, compared bucket by bucket once): the worker's CPU for all of them. Before
   each measurement one write (a PATCH of a system's name to itself) commits, so no body the
   worker keeps while the database is unchanged (`kit.versioned`) answers either side.
   Bodies are asked for uncompressed (`Accept-Encoding: identity`, as wrk asks); one round
   with gzip is printed too.
   Then `GET /portfolio/summary` and `GET /portfolio/market-value?interval=1d` (the same 31
   days, `market_zone=NL`: the systems with a zone; NL prices are imported for the window
   first) against the per-system requests for the same systems, the answers compared once.
2. The change feed, NDJSON, `limit` 100,000, from the start of the log: rows per second of wall
   time and per CPU-second of the worker, over `--feed-pages` pages; the worker's and
   PostgreSQL's backends' CPU per 100,000 rows, and each page's median. `--feed-only`
   measures this part alone (no portfolio requests, no upload: the database stays as built).
3. One day of the whole fleet (96 quarter-hours per system, uploaded through the API after the
   fleet's last day) followed from a cursor at the end of the log: how many requests it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import PG_ADMIN, SECRET, cpu_seconds, make_account, server_process
from solarapi.config import Settings
from solarapi.migrate import upgrade

# Whole-hour zones (the PostgreSQL build sums each local day from the hourly rollup).
ZONES = [("Europe/Amsterdam", "NL"), ("Europe/London", None), ("America/New_York", None),
         ("Asia/Tokyo", None)]  # fmt: skip
CHUNK = 50  # systems per transaction of the PostgreSQL build


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def psql(url: str, sql: str) -> str:
    return subprocess.run(
        ["psql", url, "-tAqc", sql], check=True, capture_output=True, text=True
    ).stdout.strip()


def day_end(days_back: int = 2) -> datetime:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days_back)


# --- building the fleet ------------------------------------------------------------------------


async def add_systems(settings: Settings, account_id: str, count: int) -> list[str]:
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.ids import new_id
    from solarapi.kit.timefmt import utcnow
    from solarapi.models.systems import System

    engine = create_oneshot_engine(settings)
    ids: list[str] = []
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            for number in range(count):
                timezone, zone = ZONES[number % len(ZONES)]
                now = utcnow()
                system = System(
                    id=new_id("sys"), account_id=account_id, environment="live",
                    name=f"Bench {number}", status="active", data_source="metered",
                    capacity_kwp=10.0, latitude=52.0, longitude=5.0, timezone=timezone,
                    tilt_deg=30.0, azimuth_deg=180.0, market_zone=zone, created_at=now,
                    updated_at=now,
                )  # fmt: skip
                session.add(system)
                ids.append(system.id)
    finally:
        await engine.dispose()
    return ids


def build_postgres(
    url: str, account_id: str, ids: list[str], start: datetime, end: datetime, log_days: int
) -> None:
    """Readings, both rollups and the change log straight in SQL, CHUNK systems per
    transaction. (The readings go to the partition the migration made for everything before
    its cut-over, as imported history does; monthly partitions start there.)"""
    lo, hi = int(start.timestamp()), int(end.timestamp())
    began = time.perf_counter()
    for first in range(0, len(ids), CHUNK):
        chunk = "ARRAY[" + ",".join(f"'{i}'" for i in ids[first : first + CHUNK]) + "]"
        psql(url, f"""
BEGIN;
CREATE TEMP TABLE fresh ON COMMIT DROP AS
SELECT s.id AS system_id, t AS start_s, floor((400 + abs(hashtext(s.id)) % 600)
    * greatest(0, sin(((t + 864000) % 86400 / 3600.0 - 5) / 14 * pi()))
    * (6 + 4 * abs(sin(t / 86400.0)))) / 10 AS energy_wh
FROM systems s CROSS JOIN generate_series({lo}, {hi - 900}, 900) AS t
WHERE s.id = ANY({chunk});
CREATE TEMP TABLE logged ON COMMIT DROP AS
SELECT system_id, hour_s, nextval('change_batches_seq_seq') AS seq FROM (
    SELECT DISTINCT system_id, start_s - start_s % 3600 AS hour_s FROM fresh
    WHERE start_s >= {hi - 86400 * log_days} ORDER BY 1, 2) h;
INSERT INTO readings (system_id, start_s, energy_wh, power_w, batch)
SELECT f.system_id, f.start_s, f.energy_wh, f.energy_wh * 4, l.seq FROM fresh f
LEFT JOIN logged l ON l.system_id = f.system_id AND l.hour_s = f.start_s - f.start_s % 3600;
INSERT INTO reading_hours (system_id, hour_s, energy_wh, samples, power_max_w)
SELECT system_id, start_s - start_s % 3600, sum(energy_wh), count(*), max(energy_wh * 4)
FROM fresh GROUP BY 1, 2;
INSERT INTO reading_days (system_id, day_start_s, energy_wh, samples, power_max_w)
SELECT h.system_id, extract(epoch FROM (date_trunc('day', to_timestamp(h.hour_s)
    AT TIME ZONE s.timezone) AT TIME ZONE s.timezone))::bigint, sum(h.energy_wh),
    sum(h.samples), max(h.power_max_w)
FROM reading_hours h JOIN systems s ON s.id = h.system_id WHERE h.system_id = ANY({chunk})
GROUP BY 1, 2;
INSERT INTO change_batches (seq, account_id, environment, txid, system_id, lo_s, hi_s)
SELECT seq, '{account_id}', 'live', pg_current_xact_id()::text::bigint, system_id, hour_s,
    hour_s + 2700
FROM logged ORDER BY seq;
UPDATE systems SET first_reading_at = to_timestamp({lo}), last_reading_at = to_timestamp({hi - 900})
WHERE id = ANY({chunk});
COMMIT;""")  # fmt: skip  # noqa: S608 - the bench's own ids
        done = min(first + CHUNK, len(ids))
        rate = done * (hi - lo) / 900 / (time.perf_counter() - began)
        print(f"  {done:,} systems, {rate:,.0f} quarter-hours/s, load {load()}", flush=True)
    psql(url, "VACUUM ANALYZE")


def monthly_partitions(settings: Settings, url: str, start: datetime) -> None:
    """`--monthly`: the fleet in a month partition per UTC month (of `readings` and of the
    change log), as the daily job leaves a backfill of history, instead of in the table from
    before the cut-over. The job runs first (it drops the fresh install's empty cut-over table
    and makes the months ahead); the fleet's past months are made here, before the rows go in
    (the job would make them too, moving every row out of the default partition)."""
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.timefmt import utcnow
    from solarapi.readings.jobs import maintain_partitions
    from solarapi.readings.partitions import SCHEMA, month_start, month_table

    async def run_job() -> None:
        engine = create_oneshot_engine(settings)
        try:
            await maintain_partitions(sessionmaker_for(engine, settings), utcnow(), None)
        finally:
            await engine.dispose()

    asyncio.run(run_job())
    month, first_ahead = month_start(start), month_start(utcnow())
    while month < first_ahead:
        lo, hi = int(month.timestamp()), int(month_start(month, 1).timestamp())
        for parent, prefix in (("readings", ""), ("change_batches", "batches_")):
            psql(url, f"CREATE TABLE {SCHEMA}.{prefix}{month_table(month)} PARTITION OF"
                      f" {parent} FOR VALUES FROM ({lo}) TO ({hi})")  # fmt: skip
        month = month_start(month, 1)


async def build_sqlite(settings: Settings, ids: list[str], start: datetime, end: datetime) -> None:
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.models.systems import System
    from solarapi.readings.upload import store_series

    starts = np.arange(int(start.timestamp()), int(end.timestamp()), 900, np.int64)
    shape = np.clip(np.sin(((starts + 864000) % 86400 / 3600 - 5) / 14 * np.pi), 0, None)
    engine = create_oneshot_engine(settings)
    try:
        maker = sessionmaker_for(engine)
        for number, system_id in enumerate(ids):
            async with maker() as session, session.begin():
                system = await session.get(System, system_id)
                assert system is not None
                energy = np.floor(10 * (400 + number % 600) * shape) / 10
                for lo in range(0, len(starts), 10_000):
                    part = slice(lo, lo + 10_000)
                    await store_series(
                        session, system, starts[part], energy[part], energy[part] * 4
                    )
            if (number + 1) % 100 == 0:
                print(f"  {number + 1:,} systems, load {load()}", flush=True)
    finally:
        await engine.dispose()


async def import_bench_prices(settings: Settings, start: datetime, end: datetime) -> None:
    """Hourly NL prices over [start, end) (a daily shape with negative midday hours), through
    the import code path, so the market value has prices to value with (an import replaces
    what the zone had for its hours: running it again changes nothing)."""
    from solarapi.db import create_oneshot_engine, sessionmaker_for
    from solarapi.kit.timefmt import utcnow
    from solarapi.kit.zones import ZONES
    from solarapi.prices.price_rows import ParsedPrices, PriceRow
    from solarapi.prices.service import import_prices

    lo, hi = int(start.timestamp()), int(end.timestamp())
    rows = [PriceRow(t, 3600, round(60 + 40 * np.cos((t % 86400) / 86400 * 2 * np.pi)
                                    - (70 if 10 <= t % 86400 // 3600 < 14 else 0), 2))
            for t in range(lo - lo % 3600, hi, 3600)]  # fmt: skip
    engine = create_oneshot_engine(settings)
    try:
        async with sessionmaker_for(engine)() as session, session.begin():
            await import_prices(session, ParsedPrices(ZONES["NL"], "csv", rows), utcnow())
    finally:
        await engine.dispose()


def prepare(args: argparse.Namespace) -> tuple[Settings, dict[str, str], dict[str, Any]]:
    env = {"SOLARAPI_SECRET_KEY": SECRET, "SOLARAPI_JOB_RUNNER": "external",
           "SOLARAPI_RATE_LIMIT_SCALE": "100000"}  # fmt: skip
    if args.postgres:
        name = args.postgres
        if not name.replace("_", "").isalnum():
            raise SystemExit(f"unsafe database name {name!r}")
        url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
        data_dir = Path("/tmp") / f"bench-portfolio-{name}"
        exists = psql(PG_ADMIN, f"SELECT 1 FROM pg_database WHERE datname = '{name}'") == "1"  # noqa: S608
        if args.rebuild and exists:
            psql(PG_ADMIN, f'DROP DATABASE "{name}" WITH (FORCE)')
            exists = False
        if not exists:
            psql(PG_ADMIN, f'CREATE DATABASE "{name}"')
            (data_dir / "fleet.json").unlink(missing_ok=True)
        env["SOLARAPI_DATABASE_URL"] = url
    else:
        data_dir = Path(args.sqlite)
        if args.rebuild:
            for path in data_dir.glob("*"):
                path.unlink()
    data_dir.mkdir(parents=True, exist_ok=True)
    env["SOLARAPI_DATA_DIR"] = str(data_dir)
    settings = Settings(data_dir=data_dir, secret_key=SECRET,
                        database_url=env.get("SOLARAPI_DATABASE_URL", ""))  # fmt: skip
    state_file = data_dir / "fleet.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        print(
            f"reusing the fleet of {state_file}: {len(state['ids']):,} systems × {state['days']} days"
        )
        return settings, env, state
    upgrade(settings)
    end = day_end()
    start = end - timedelta(days=args.days)
    account_id, keys = asyncio.run(make_account(settings, 1))
    ids = asyncio.run(add_systems(settings, account_id, args.systems))
    print(f"building {args.systems:,} systems × {args.days} days "
          f"= {args.systems * args.days * 96:,} quarter-hours (load {load()})", flush=True)  # fmt: skip
    began = time.perf_counter()
    if args.postgres and args.monthly:
        monthly_partitions(settings, env["SOLARAPI_DATABASE_URL"], start)
    if args.postgres:
        build_postgres(env["SOLARAPI_DATABASE_URL"], account_id, ids, start, end, args.log_days)
    else:
        asyncio.run(build_sqlite(settings, ids, start, end))
    print(f"built in {time.perf_counter() - began:.0f} s", flush=True)
    state = {"account_id": account_id, "key": keys[0], "ids": ids, "days": args.days,
             "end": end.isoformat()}  # fmt: skip
    state_file.write_text(json.dumps(state))
    return settings, env, state


# --- measuring ---------------------------------------------------------------------------------


def pg_backends(env: dict[str, str]) -> list[int]:
    url = env.get("SOLARAPI_DATABASE_URL")
    if not url:
        return []
    name = url.rsplit("/", 1)[1]
    out = psql(PG_ADMIN, f"SELECT pid FROM pg_stat_activity WHERE datname = '{name}'")  # noqa: S608
    return [int(line) for line in out.split() if line]


def measure(
    settings: Settings, env: dict[str, str], state: dict[str, Any], args: argparse.Namespace
) -> None:
    from solarapi.changes import cursor

    ids: list[str] = state["ids"]
    end = datetime.fromisoformat(state["end"])
    window = {"from": (end - timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "to": end.strftime("%Y-%m-%dT%H:%M:%SZ"), "interval": "1d"}  # fmt: skip
    headers = {"Authorization": f"Bearer {state['key']}", "Accept-Encoding": "identity"}
    asyncio.run(import_bench_prices(settings, end - timedelta(days=32), end))
    print(f"load average at the start: {load()}")
    with (
        server_process(env) as (base, pid),
        httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=600) as client,
    ):

        def touch() -> None:
            response = client.patch(f"/systems/{ids[0]}", json={"name": "Bench 0"})
            assert response.status_code == 200, response.text

        def portfolio(**extra: str) -> httpx.Response:
            response = client.get(
                "/portfolio/readings", params={**window, "limit": "1000"}, headers=extra
            )
            assert response.status_code == 200, response.text
            return response

        if not args.feed_only:
            portfolio()  # warm: imports, the frames of the ranges, the database's caches
            for system_id in ids[:20]:
                client.get(f"/systems/{system_id}/readings", params=window)
            # 1. The portfolio request against one request per system, same numbers.
            latencies, fleet_cpu, pg_fleet = [], [], []
            for _ in range(args.rounds):
                touch()
                backends = pg_backends(env)
                cpu, pg, began = cpu_seconds([pid]), cpu_seconds(backends), time.perf_counter()
                body = portfolio()
                latencies.append(time.perf_counter() - began)
                fleet_cpu.append(cpu_seconds([pid]) - cpu)
                pg_fleet.append(cpu_seconds(backends) - pg)
            fleet = body.json()
            assert len(fleet["data"]) == len(ids)
            single_cpu, pg_single = [], []
            for round_ in range(args.single_rounds):
                touch()
                backends = pg_backends(env)
                cpu, pg = cpu_seconds([pid]), cpu_seconds(backends)
                singles = [client.get(f"/systems/{i}/readings", params=window) for i in ids]
                single_cpu.append(cpu_seconds([pid]) - cpu)
                pg_single.append(cpu_seconds(backends) - pg)
                if round_ == 0:
                    for item, single in zip(fleet["data"], singles, strict=True):
                        one = single.json()
                        assert item["data"] == one["data"], item["system_id"]
                        assert item["totals"] == one["meta"]["totals"], item["system_id"]
            touch()
            cpu = cpu_seconds([pid])
            gzipped = portfolio(**{"Accept-Encoding": "gzip"})
            gzip_cpu = cpu_seconds([pid]) - cpu
            latencies.sort()
            p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
            # The kernel counts CPU time in ticks of 10 ms: the mean over the rounds, not a median.
            fleet_median, single_median = statistics.mean(fleet_cpu), statistics.median(single_cpu)
            print(f"portfolio 1d × 31 days, {len(ids):,} systems, {len(body.content):,} bytes: "
                  f"wall median {statistics.median(latencies) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms "
                  f"({args.rounds} rounds); worker CPU {fleet_median * 1000:.0f} ms "
                  f"(PostgreSQL backends {statistics.mean(pg_fleet) * 1000:.0f} ms), mean of the rounds")  # fmt: skip
            print(f"{len(ids):,} per-system requests, same numbers (checked): worker CPU "
                  f"{single_median:.2f} s (PostgreSQL backends {statistics.median(pg_single):.2f} s) "
                  f"= {single_median / fleet_median:.1f}× the portfolio request's "
                  f"(rounds: {[round(x, 2) for x in single_cpu]} s vs "
                  f"{[round(x * 1000) for x in fleet_cpu]} ms)")  # fmt: skip
            print(f"portfolio with gzip: {gzipped.num_bytes_downloaded:,} bytes compressed, worker CPU "
                  f"{gzip_cpu * 1000:.0f} ms")  # fmt: skip
            print(f"load average: {load()}")

            # 1b. Summary and market value: one request against the per-system requests.
            for name, path, single_path, params in (
                ("summary", "/portfolio/summary", "/systems/{}/summary", {}),
                ("market value 1d × 31 days, NL", "/portfolio/market-value",
                 "/systems/{}/market-value", {**window, "market_zone": "NL"}),
            ):  # fmt: skip
                compare_fleet(client, touch, pid, env, args, name, path, single_path, params)

        # 2. The feed from the start of the log; each page's wall time, the worker's CPU and
        # PostgreSQL's (the pool's backends, listed after a first page opened them).
        ndjson = {"Accept": "application/x-ndjson"}
        client.get("/readings/changes", params={"limit": "1000"}, headers=ndjson)
        backends = pg_backends(env)
        token, rows, pages = None, 0, 0
        page_rows, page_wall, page_cpu, page_pg = [], [], [], []
        cpu, pg, began = cpu_seconds([pid]), cpu_seconds(backends), time.perf_counter()
        for _ in range(args.feed_pages):
            params = {"limit": "100000"} if token is None else {"limit": "100000", "cursor": token}
            page_began = time.perf_counter()
            page_at, pg_at = cpu_seconds([pid]), cpu_seconds(backends)
            response = client.get("/readings/changes", params=params, headers=ndjson)
            assert response.status_code == 200, response.text
            content = response.content
            page_wall.append(time.perf_counter() - page_began)
            page_cpu.append(cpu_seconds([pid]) - page_at)
            page_pg.append(cpu_seconds(backends) - pg_at)
            tail = last_line(content)
            page_rows.append(content.count(b"\n") - 1)
            rows += page_rows[-1]
            pages += 1
            token = tail["next_cursor"]
            if not tail["has_more"]:
                break
        wall, worker = time.perf_counter() - began, cpu_seconds([pid]) - cpu
        database = cpu_seconds(backends) - pg
        print(f"change feed NDJSON: {rows:,} rows in {pages} requests, {rows / wall:,.0f} rows/s "
              f"wall, {rows / worker:,.0f} rows per CPU-second of the worker; per 100,000 rows: "
              f"worker {worker / rows * 1e8:.0f} ms, PostgreSQL backends "
              f"{database / rows * 1e8:.0f} ms (load {load()})")  # fmt: skip
        full = [i for i, count in enumerate(page_rows) if count == 100_000]
        if full:
            print(f"  pages of 100,000 rows ({len(full)}), median: wall "
                  f"{statistics.median(page_wall[i] for i in full) * 1000:.0f} ms, worker "
                  f"{statistics.median(page_cpu[i] for i in full) * 1000:.0f} ms, PostgreSQL "
                  f"{statistics.median(page_pg[i] for i in full) * 1000:.0f} ms")  # fmt: skip
        if args.feed_only:
            print(f"load average at the end: {load()}")
            return

        # 3. A fleet-day from a cursor at the end of the log.
        last = feed_end(env, state)
        token = cursor.encode(cursor.Position(*last), secret=SECRET.encode(),
                              account_id=state["account_id"], environment="live",
                              now=datetime.now(UTC))  # fmt: skip
        day = [{"timestamp": (end + timedelta(minutes=15 * q)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "energy_wh": float(q % 50), "power_w": float(q % 50) * 4} for q in range(96)]  # fmt: skip
        for system_id in ids:
            response = client.post(f"/systems/{system_id}/readings", json={"readings": day})
            assert response.status_code == 200, response.text
        got, requests, carrying, deadline, pause = 0, 0, 0, time.monotonic() + 300, 0.05
        while time.monotonic() < deadline:
            response = client.get(
                "/readings/changes", params={"limit": "100000", "cursor": token}, headers=ndjson
            )
            content = response.content
            tail = last_line(content)
            got += content.count(b"\n") - 1
            requests += 1
            carrying += content.count(b"\n") > 1
            token = tail["next_cursor"]
            if got >= len(ids) * 96 and not tail["has_more"]:
                break
            if content.count(b"\n") == 1:  # held back: ask again, backing off
                time.sleep(pause)
                pause = min(2 * pause, 1.0)
        # On PostgreSQL a request may come back empty while a transaction older than the
        # upload (any of the cluster's) is still open: the rows wait below the horizon.
        print(f"one fleet-day: {len(ids) * 96:,} rows uploaded, {got:,} received in "
              f"{carrying} NDJSON request(s) that carried rows ({requests} requests in all)")  # fmt: skip
        if got < len(ids) * 96 and env.get("SOLARAPI_DATABASE_URL"):
            oldest = psql(PG_ADMIN, "SELECT max(now() - xact_start) FROM pg_stat_activity "
                                    "WHERE backend_xid IS NOT NULL")  # fmt: skip
            print(f"  held back: the server's oldest open writing transaction is {oldest} old")
    print(f"load average at the end: {load()}")


def compare_fleet(
    client: httpx.Client,
    touch: Any,
    pid: int,
    env: dict[str, str],
    args: argparse.Namespace,
    name: str,
    path: str,
    single_path: str,
    params: dict[str, str],
) -> None:
    """One portfolio request (`limit` 1,000) against the per-system requests of its systems:
    the worker's CPU (and PostgreSQL's backends'), the answers compared once."""

    def fleet_request() -> httpx.Response:
        response = client.get(path, params={**params, "limit": "1000"})
        assert response.status_code == 200, response.text
        return response

    single_params = {key: value for key, value in params.items() if key != "market_zone"}
    fleet_request()  # warm
    fleet_cpu, pg_fleet = [], []
    for _ in range(max(3, args.rounds // 4)):
        touch()
        backends = pg_backends(env)
        cpu, pg = cpu_seconds([pid]), cpu_seconds(backends)
        body = fleet_request()
        fleet_cpu.append(cpu_seconds([pid]) - cpu)
        pg_fleet.append(cpu_seconds(backends) - pg)
    items = body.json()["data"]
    ids = [item["system_id"] for item in items]
    single_cpu, pg_single = [], []
    for round_ in range(args.single_rounds):
        touch()
        backends = pg_backends(env)
        cpu, pg = cpu_seconds([pid]), cpu_seconds(backends)
        singles = [client.get(single_path.format(i), params=single_params) for i in ids]
        single_cpu.append(cpu_seconds([pid]) - cpu)
        pg_single.append(cpu_seconds(backends) - pg)
        if round_ == 0:
            for item, single in zip(items, singles, strict=True):
                assert single.status_code == 200, single.text
                one = single.json()
                if "meta" in one:  # market value
                    assert item["data"] == one["data"], item["system_id"]
                    assert item["totals"] == one["meta"]["totals"], item["system_id"]
                else:
                    assert item == {"system_id": item["system_id"], **one}, item["system_id"]
    fleet_mean, single_median = statistics.mean(fleet_cpu), statistics.median(single_cpu)
    print(f"{name}, {len(ids):,} systems, {len(body.content):,} bytes: worker CPU "
          f"{fleet_mean * 1000:.0f} ms (PostgreSQL backends {statistics.mean(pg_fleet) * 1000:.0f} "
          f"ms); {len(ids):,} per-system requests, same numbers (checked): {single_median:.2f} s "
          f"(PostgreSQL backends {statistics.median(pg_single):.2f} s) = "
          f"{single_median / fleet_mean:.1f}× (load {load()})")  # fmt: skip


def last_line(content: bytes) -> dict[str, Any]:
    """The NDJSON body's last line (the cursor's)."""
    lines = content.rstrip(b"\n")
    at = lines.rfind(b"\n")
    tail: dict[str, Any] = json.loads(lines[at + 1 :])
    return tail


def feed_end(env: dict[str, str], state: dict[str, Any]) -> tuple[int, int]:
    """The log's last position now (the bench knows the server's secret, so it may make a
    cursor there instead of reading 35 M rows to reach it)."""
    url = env.get("SOLARAPI_DATABASE_URL")
    account = state["account_id"]
    sql = (f"SELECT txid, seq FROM change_batches WHERE account_id = '{account}' "  # noqa: S608
           "ORDER BY txid DESC, seq DESC LIMIT 1")  # fmt: skip
    if url:
        txid, seq = psql(url, sql).split("|")
        return int(txid), int(seq)
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(env["SOLARAPI_DATA_DIR"]) / "solar.db")) as db:
        txid, seq = db.execute(sql).fetchone()
    return int(txid), int(seq)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--postgres", help="name of the PostgreSQL database (made if missing)")
    where.add_argument("--sqlite", help="data directory of the SQLite database")
    parser.add_argument("--systems", type=int, default=1000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rounds", type=int, default=20, help="portfolio requests timed")
    parser.add_argument(
        "--single-rounds", type=int, default=3, help="rounds of per-system requests"
    )
    parser.add_argument("--feed-pages", type=int, default=10)
    parser.add_argument("--log-days", type=int, default=31,
                        help="PostgreSQL: the change log holds the fleet's last N days")  # fmt: skip
    parser.add_argument("--feed-only", action="store_true",
                        help="measure the change feed only (no portfolio, no upload)")  # fmt: skip
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--monthly", action="store_true",
                        help="PostgreSQL: the fleet in monthly partitions, not the cut-over table")  # fmt: skip
    args = parser.parse_args()
    settings, env, state = prepare(args)
    if not args.build_only:
        measure(settings, env, state, args)


if __name__ == "__main__":
    uuid.uuid4()  # (the harness' account e-mails use it)
    main()
