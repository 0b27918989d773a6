"""Four designs of the change feed's log, measured on scratch tables (issue 34's bulk upload).

    flock /work/notes/prof/lock .venv/bin/python bench/readings/log_designs.py setup
    flock /work/notes/prof/lock .venv/bin/python bench/readings/log_designs.py measure \
        [--rounds 30] [--api] [--reindex] [--elsewhere 300]
    .venv/bin/python bench/readings/log_designs.py drop

(`flock …` is this project's shared machine's measuring lock; elsewhere leave it out.)

`setup` makes the scratch database `logdesign_scratch` on the server of
`SOLARAPI_TEST_POSTGRES_URL` (default `postgresql://postgres@127.0.0.1:5432/test`) with one
schema per design, each shaped like the real tables (`readings` and the log partitioned by UTC
month of `start_s`, the real keys and indexes, `reading_hours` unpartitioned), and loads every
schema with the same 3,000,000 quarter-hours of 1,000 systems of 50 accounts (system i: 3,000
quarter-hours from 2026-01-01 + (i mod 4) × 30 days, so January to April hold ~750,000 rows
each), written as if by hourly uploads of 4 quarter-hours (one change batch per system-hour).

- `v_a`, **A, as now**: `readings` + `reading_changes` (text `system_id`, `account_id`,
  `environment`; unique (`system_id`, `start_s`), feed index (`account_id`, `environment`,
  `txid`, `seq`)).
- `v_b`, **B, integer surrogates in the log**: `reading_changes` with `system_key` int8 and
  `stream` int8 for (account, environment); unique (`system_key`, `start_s`), feed index
  (`stream`, `txid`, `seq`).
- `v_c`, **C, the log merged into readings**: `readings` gets `stream`, `txid` and `seq`
  (a sequence's default) and the feed index (`stream`, `txid`, `seq`); no log table.
- `v_d`, **D, a batch-level log**: `readings` gets `batch` int8 (the change batch that last
  wrote the row); `change_batches` (`stream`, `txid`, `seq`, `system_id`, `lo_s`, `hi_s`),
  one row per upload, with the feed index (`stream`, `txid`, `seq`).
- `v_e`, **E**: A's tables left empty, as `upload_cpu.py bulk`'s fresh database has them
  (uploads only).

`measure` (needs `setup` first), per design, in alternated order (a round = one of each):
- **uploads**: one transaction of 10,000 new quarter-hours of a new system (2026-01-01 on,
  so four populated months) as the service writes it: the one statement (the system's row
  locked, the transaction id; D also inserts its batch row), binary `COPY` (asyncpg's
  `copy_to_table`, the buffers built by the service's `binary_copy`) of the readings, of the
  log's 10,000 rows (A, B) and of the 2,500 hourly rollup rows, then `COMMIT`. Timed per
  piece; the buffers built after the statement (they hold its txid or batch) are timed apart
  as the API's share. WAL bytes per transaction: `pg_current_wal_insert_lsn()` before and
  after (the server's: other databases' writes count too, so the median is the figure).
- **feed reads**: the feed's page statement (`db/postgres.py`'s `_CHANGE_LOG`, adapted) of
  100,000 rows that 10 uploads wrote, and of the 60,000 rows of account 0's hourly
  4-quarter-hour batches; rows/s of the statement's wall time (the bytea included).
- **W1 read**: one system-day of `15m` (96 rows, `store_postgres._Packed`'s statement),
  median per call over the same 300 random system-days in every design.
- **bytes per stored quarter-hour** (after `VACUUM ANALYZE`; heap + indexes + TOAST,
  partitions included) of `readings`, the log and the hourly rollups; with `--reindex` again
  after `REINDEX` (indexes as one-system-at-a-time bulk uploads leave them, against the
  hourly uploads' interleaved page splits; it leaves them rebuilt for later runs).
- `--api`: a fresh migrated database and one `solarapi serve` as `upload_cpu.py bulk` makes
  them, its HTTP upload of the same 10,000 quarter-hours alternated with the designs' rounds,
  `log_min_duration_statement = 0` on that database: the service's database time per upload
  is read back from the server's log (`--pg-log`, Debian's path by default; reading it needs
  the right to), the API's own time is the wall time minus it, and each design's readings/s
  is estimated as 10,000 ÷ (the API's own time − E's buffers + the design's buffers + the
  design's database time), also with that time scaled by (the service's ÷ E's).

- `--elsewhere N`: N small uploads per design (4 new quarter-hours after a preloaded system's
  last, one statement of the service's shape), then 10 replacements per design of 10,000
  stored quarter-hours (`INSERT … ON CONFLICT DO UPDATE`, the log's row moved), timed with
  their WAL.

`drop` drops the scratch database.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))  # upload_cpu, and bench/ for its harness
sys.path.insert(0, str(Path(__file__).parent.parent))

from solarapi.kit.ids import new_id
from solarapi.readings.store_postgres import binary_copy

DATABASE = "logdesign_scratch"
SYSTEMS = 1_000
ACCOUNTS = 50
PER_SYSTEM = 3_000
UPLOAD = 10_000
BASE = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
MONTHS = [datetime(2025 + (m // 12), m % 12 + 1, 1, tzinfo=UTC) for m in range(11, 25)]
VARIANTS = ("a", "b", "c", "d")
# E: A's tables left empty (no preload), as `upload_cpu.py bulk`'s fresh database has them: the
# database's time of the upload that script times end to end, so that API = wall − E.
SCHEMAS = (*VARIANTS, "e")
NAMES = {
    "e": "A on empty tables",
    "a": "A as now",
    "b": "B integer surrogates",
    "c": "C log merged into readings",
    "d": "D batch-level log",
}


def _urls() -> tuple[str, str]:
    admin = os.environ.get(
        "SOLARAPI_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    return admin, admin.rsplit("/", 1)[0] + "/" + DATABASE


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --- the tables ------------------------------------------------------------------------------

_READINGS = {
    "a": "",
    "b": "",
    "c": ", stream int8 NOT NULL, txid int8 NOT NULL, seq int8 NOT NULL DEFAULT nextval('{s}.seq')",
    "d": ", batch int8 NOT NULL",
}
_LOG = {
    "a": (
        "CREATE TABLE {s}.reading_changes (seq int8 NOT NULL DEFAULT nextval('{s}.seq'),"
        " system_id varchar(40) NOT NULL, start_s int8 NOT NULL, account_id varchar(40) NOT NULL,"
        " environment varchar(4) NOT NULL, txid int8 NOT NULL, energy_wh float8 NOT NULL,"
        " power_w float8, UNIQUE (system_id, start_s)) PARTITION BY RANGE (start_s);"
        "CREATE INDEX ON {s}.reading_changes (account_id, environment, txid, seq)"
    ),
    "b": (
        "CREATE TABLE {s}.reading_changes (seq int8 NOT NULL DEFAULT nextval('{s}.seq'),"
        " system_key int8 NOT NULL, start_s int8 NOT NULL, stream int8 NOT NULL,"
        " txid int8 NOT NULL, energy_wh float8 NOT NULL, power_w float8,"
        " UNIQUE (system_key, start_s)) PARTITION BY RANGE (start_s);"
        "CREATE INDEX ON {s}.reading_changes (stream, txid, seq)"
    ),
    "c": "CREATE INDEX ON {s}.readings (stream, txid, seq)",
    "d": (
        "CREATE TABLE {s}.change_batches (stream int8 NOT NULL, txid int8 NOT NULL,"
        " seq int8 NOT NULL DEFAULT nextval('{s}.seq'), system_id varchar(40) NOT NULL,"
        " lo_s int8 NOT NULL, hi_s int8 NOT NULL);"
        "CREATE INDEX ON {s}.change_batches (stream, txid, seq)"
    ),
}
_PARTITIONED = {"a": ("readings", "reading_changes"), "b": ("readings", "reading_changes")}


def _schema_sql(v: str) -> str:
    s, shape = f"v_{v}", "a" if v == "e" else v
    parts = [
        f"CREATE SCHEMA {s}",
        f"CREATE SEQUENCE {s}.seq",
        f"CREATE TABLE {s}.systems (id varchar(40) PRIMARY KEY, account_id varchar(40) NOT NULL,"
        " environment varchar(4) NOT NULL, key int8 NOT NULL, stream int8 NOT NULL,"
        " data_version int4 NOT NULL DEFAULT 0, last_reading_at int8)",
        f"CREATE TABLE {s}.readings (system_id varchar(40) NOT NULL, start_s int8 NOT NULL,"
        " energy_wh float8 NOT NULL, power_w float8"
        + _READINGS[shape].format(s=s)
        + ", PRIMARY KEY (system_id, start_s)) PARTITION BY RANGE (start_s)",
        f"CREATE TABLE {s}.reading_hours (system_id varchar(40) NOT NULL, hour_s int8 NOT NULL,"
        " energy_wh float8 NOT NULL, samples int4 NOT NULL, power_max_w float8,"
        " PRIMARY KEY (system_id, hour_s))",
        _LOG[shape].format(s=s),
    ]
    for table in _PARTITIONED.get(shape, ("readings",)):
        for start, end in itertools.pairwise(MONTHS):
            parts.append(
                f"CREATE TABLE {s}.{table}_m{start:%Y_%m} PARTITION OF {s}.{table}"
                f" FOR VALUES FROM ({int(start.timestamp())}) TO ({int(end.timestamp())})"
            )
        parts.append(f"CREATE TABLE {s}.{table}_outside PARTITION OF {s}.{table} DEFAULT")
    return ";\n".join(parts)


# The preload's rows, once, in the order their (simulated) writers wrote them: system i's
# hour h is one upload (batch h * 1000 + i + 1) in transaction 10 + h / 4 (small: the scratch
# server's own transaction ids must come after them), seq in that order.
_SOURCE = f"""
CREATE UNLOGGED TABLE src AS
SELECT s.id AS system_id, s.account_id, s.environment, s.key, s.stream,
       t.start_s, 100 + (t.k % 400)::float8 AS energy_wh,
       CASE WHEN t.k % 97 = 0 THEN NULL ELSE 400 + (t.k % 1600)::float8 END AS power_w,
       10 + (t.start_s - {BASE}) / 14400 AS txid,
       ((t.start_s - {BASE}) / 3600) * 1000 + s.key AS batch,
       row_number() OVER (ORDER BY (t.start_s - {BASE}) / 3600, s.key, t.start_s) AS seq
FROM v_a.systems s
CROSS JOIN LATERAL (
    SELECT k, {BASE} + ((s.key - 1) % 4) * 30 * 86400 + k * 900 AS start_s
    FROM generate_series(0, {PER_SYSTEM - 1}) AS k
) t
WHERE s.key <= {SYSTEMS}
"""  # noqa: S608 - constants
_PRELOAD = {
    "a": [
        "INSERT INTO v_a.readings SELECT system_id, start_s, energy_wh, power_w FROM src",
        "INSERT INTO v_a.reading_changes (seq, system_id, start_s, account_id, environment,"
        " txid, energy_wh, power_w) SELECT seq, system_id, start_s, account_id, environment,"
        " txid, energy_wh, power_w FROM src ORDER BY seq",
    ],
    "b": [
        "INSERT INTO v_b.readings SELECT system_id, start_s, energy_wh, power_w FROM src",
        "INSERT INTO v_b.reading_changes (seq, system_key, start_s, stream, txid, energy_wh,"
        " power_w) SELECT seq, key, start_s, stream, txid, energy_wh, power_w FROM src"
        " ORDER BY seq",
    ],
    "c": [
        "INSERT INTO v_c.readings SELECT system_id, start_s, energy_wh, power_w, stream, txid,"
        " seq FROM src ORDER BY seq",
    ],
    "d": [
        "INSERT INTO v_d.readings SELECT system_id, start_s, energy_wh, power_w, batch FROM src",
        "INSERT INTO v_d.change_batches (stream, txid, seq, system_id, lo_s, hi_s)"
        " SELECT min(stream), min(txid), batch, min(system_id), min(start_s), max(start_s)"
        " FROM src GROUP BY batch ORDER BY batch",
    ],
}
_HOURS = (
    "INSERT INTO {s}.reading_hours SELECT system_id, start_s - start_s % 3600, sum(energy_wh),"
    " count(*), max(power_w) FROM src GROUP BY 1, 2"
)


async def setup(uploads: int) -> None:
    admin_url, url = _urls()
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    await admin.execute(f"CREATE DATABASE {DATABASE}")
    await admin.close()
    conn = await asyncpg.connect(url)
    accounts = [new_id("acct") for _ in range(ACCOUNTS)]
    # The preloaded systems, then the uploads' (ULIDs sort by creation: the newest last), all
    # in account 0's live environment (stream 1).
    systems = [
        (new_id("sys"), accounts[i % ACCOUNTS], "live", i + 1, i % ACCOUNTS + 1)
        for i in range(SYSTEMS)
    ]
    systems += [
        (new_id("sys"), accounts[0], "live", SYSTEMS + i + 1, 1) for i in range(uploads * 8)
    ]
    for v in SCHEMAS:
        await conn.execute(_schema_sql(v))
        await conn.copy_records_to_table(
            "systems",
            schema_name=f"v_{v}",
            records=systems,
            columns=["id", "account_id", "environment", "key", "stream"],
        )
    began = time.perf_counter()
    await conn.execute(_SOURCE)
    print(f"source rows: {time.perf_counter() - began:.1f} s", flush=True)
    for v in VARIANTS:
        began = time.perf_counter()
        for statement in [*_PRELOAD[v], _HOURS.format(s=f"v_{v}")]:
            await conn.execute(statement)
        await conn.execute(f"SELECT setval('v_{v}.seq', 10000000)")
        print(f"preload {NAMES[v]}: {time.perf_counter() - began:.1f} s", flush=True)
    await conn.execute("DROP TABLE src")
    await conn.close()
    await _vacuum(url)


async def _vacuum(url: str) -> None:
    conn = await asyncpg.connect(url)
    await conn.execute("VACUUM ANALYZE")
    await conn.close()


async def drop() -> None:
    admin_url, _ = _urls()
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    await admin.close()


# --- one upload ------------------------------------------------------------------------------

_STATEMENT = (
    "UPDATE {s}.systems SET data_version = data_version + 1, last_reading_at = $2"
    " WHERE id = $1 RETURNING pg_current_xact_id()::text::bigint, key, stream, account_id,"
    " environment"
)
_STATEMENT_D = (
    "WITH sys AS (UPDATE v_d.systems SET data_version = data_version + 1, last_reading_at = $2"
    " WHERE id = $1 RETURNING id, stream, account_id, environment, key),"
    " b AS (INSERT INTO v_d.change_batches (stream, txid, system_id, lo_s, hi_s)"
    " SELECT stream, pg_current_xact_id()::text::bigint, id, $3, $2 FROM sys"
    " RETURNING txid, seq)"
    " SELECT (SELECT txid FROM b), key, stream, account_id, environment, (SELECT seq FROM b)"
    " FROM sys"
)


@dataclass
class Upload:
    """One upload's times (seconds) and WAL bytes."""

    pieces: dict[str, float] = field(default_factory=dict)
    build: float = 0.0
    wal: int = 0
    txid: int = 0

    @property
    def database(self) -> float:
        return sum(self.pieces.values())


async def _wal_position(conn: asyncpg.Connection) -> int:
    """The server's WAL insert position in bytes (`pg_current_wal_insert_lsn()`)."""
    text: str = await conn.fetchval("SELECT pg_current_wal_insert_lsn()::text")
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


@dataclass
class Batch:
    starts: npt.NDArray[np.int64]
    energy: npt.NDArray[np.float64]
    power: npt.NDArray[np.float64]
    hour_starts: npt.NDArray[np.int64]
    hour_energy: npt.NDArray[np.float64]
    hour_samples: npt.NDArray[np.int32]
    hour_power: npt.NDArray[np.float64]


def _batch() -> Batch:
    k = np.arange(UPLOAD, dtype=np.int64)
    starts = BASE + k * 900
    energy = (100 + k % 400).astype(np.float64)
    power = (400 + k % 1600).astype(np.float64)
    return Batch(
        starts,
        energy,
        power,
        starts[::4].copy(),
        energy.reshape(-1, 4).sum(axis=1),
        np.full(UPLOAD // 4, 4, dtype=np.int32),
        power.reshape(-1, 4).max(axis=1),
    )


async def upload(conn: asyncpg.Connection, v: str, system_id: str, batch: Batch) -> Upload:
    s = f"v_{v}"
    v = "a" if v == "e" else v  # E is A's shape
    sid = system_id.encode()
    result = Upload()
    clock = time.perf_counter

    async def timed(name: str, call: Callable[[], Awaitable[Any]]) -> Any:
        began = clock()
        value = await call()
        result.pieces[name] = result.pieces.get(name, 0.0) + clock() - began
        return value

    async def copy(name: str, table: str, columns: list[str], source: memoryview) -> None:
        await timed(
            name,
            lambda: conn.copy_to_table(
                table, schema_name=s, columns=columns, source=source, format="binary"
            ),
        )

    lo, hi = int(batch.starts.min()), int(batch.starts.max())
    before = await _wal_position(conn)
    await timed("begin", lambda: conn.execute("BEGIN"))
    if v == "d":
        row = await timed("statement", lambda: conn.fetchrow(_STATEMENT_D, system_id, hi, lo))
    else:
        row = await timed("statement", lambda: conn.fetchrow(_STATEMENT.format(s=s), system_id, hi))
    txid, key, stream, account, environment = row[:5]
    result.txid = txid
    position = row[5] if v == "d" else txid  # what the rows carry: txid, or D's batch
    began = clock()
    columns: list[bytes | int | npt.NDArray[Any]] = [sid, batch.starts, batch.energy, batch.power]
    names = ["system_id", "start_s", "energy_wh", "power_w"]
    if v == "c":
        columns += [int(stream), int(position)]
        names += ["stream", "txid"]
    elif v == "d":
        columns += [int(position)]
        names += ["batch"]
    readings = binary_copy(UPLOAD, columns)
    log: memoryview | None = None
    log_names: list[str] = []
    if v == "a":
        log_names = [
            "system_id",
            "start_s",
            "account_id",
            "environment",
            "txid",
            "energy_wh",
            "power_w",
        ]
        log = binary_copy(
            UPLOAD,
            [sid, batch.starts, account.encode(), environment.encode(), int(position),
             batch.energy, batch.power],
        )  # fmt: skip
    elif v == "b":
        log_names = ["system_key", "start_s", "stream", "txid", "energy_wh", "power_w"]
        log = binary_copy(
            UPLOAD, [batch.starts * 0 + key, batch.starts, int(stream), int(position),
                     batch.energy, batch.power],
        )  # fmt: skip
    hours = binary_copy(
        len(batch.hour_starts),
        [sid, batch.hour_starts, batch.hour_energy, batch.hour_samples, batch.hour_power],
    )
    result.build = clock() - began
    await copy("readings", "readings", names, readings)
    if log is not None:
        await copy("log", "reading_changes", log_names, log)
    await copy(
        "hours", "reading_hours", ["system_id", "hour_s", "energy_wh", "samples", "power_max_w"],
        hours,
    )  # fmt: skip
    await timed("commit", lambda: conn.execute("COMMIT"))
    after = await _wal_position(conn)
    result.wal = after - before
    return result


# --- elsewhere: a small upload, a replacement ------------------------------------------------

# An hour of a meter (4 new quarter-hours after the system's last) in one statement, its own
# transaction, as the service's one statement writes it (the system's row, readings, the log
# or the batch, the hourly rollup; not the event, jobs or daily rollup, the same for all).
_SMALL_HEAD = """
WITH sys AS (
    UPDATE {s}.systems SET data_version = data_version + 1, last_reading_at = $6 WHERE id = $1
    RETURNING id, key, stream, account_id, environment, pg_current_xact_id()::text::bigint AS txid
), batch AS (
    SELECT * FROM unnest($2::int8[], $3::float8[], $4::float8[]) AS u(s, e, p)
), hrs AS (
    INSERT INTO {s}.reading_hours (system_id, hour_s, energy_wh, samples, power_max_w)
    SELECT sys.id, $7, $8, 4, $9 FROM sys
    ON CONFLICT (system_id, hour_s) DO UPDATE SET energy_wh = excluded.energy_wh
)"""
_SMALL = {
    "a": """, ins AS (
    INSERT INTO v_a.readings (system_id, start_s, energy_wh, power_w)
    SELECT sys.id, batch.s, batch.e, batch.p FROM sys, batch
), chg AS (
    INSERT INTO v_a.reading_changes
        (system_id, start_s, account_id, environment, txid, energy_wh, power_w)
    SELECT sys.id, batch.s, sys.account_id, sys.environment, sys.txid, batch.e, batch.p
    FROM sys, batch
) SELECT $5::int8 FROM sys""",
    "b": """, ins AS (
    INSERT INTO v_b.readings (system_id, start_s, energy_wh, power_w)
    SELECT sys.id, batch.s, batch.e, batch.p FROM sys, batch
), chg AS (
    INSERT INTO v_b.reading_changes (system_key, start_s, stream, txid, energy_wh, power_w)
    SELECT sys.key, batch.s, sys.stream, sys.txid, batch.e, batch.p FROM sys, batch
) SELECT $5::int8 FROM sys""",
    "c": """, ins AS (
    INSERT INTO v_c.readings (system_id, start_s, energy_wh, power_w, stream, txid)
    SELECT sys.id, batch.s, batch.e, batch.p, sys.stream, sys.txid FROM sys, batch
) SELECT $5::int8 FROM sys""",
    "d": """, b AS (
    INSERT INTO v_d.change_batches (stream, txid, system_id, lo_s, hi_s)
    SELECT stream, txid, id, $5, $6 FROM sys RETURNING seq
), ins AS (
    INSERT INTO v_d.readings (system_id, start_s, energy_wh, power_w, batch)
    SELECT sys.id, batch.s, batch.e, batch.p, b.seq FROM sys, batch, b
) SELECT $5::int8 FROM sys""",
}

# Replacing 10,000 stored quarter-hours (the general way: INSERT … ON CONFLICT DO UPDATE from
# arrays; the log's row moves to a new position), rollups left out (the same for all).
_REPLACE_ROWS = """
INSERT INTO {s}.readings (system_id, start_s, energy_wh, power_w{extra})
SELECT $1, u.s, u.e, u.p{values} FROM unnest($2::int8[], $3::float8[], $4::float8[]) AS u(s, e, p)
ON CONFLICT (system_id, start_s) DO UPDATE SET energy_wh = excluded.energy_wh,
    power_w = excluded.power_w{moved}"""
_ARRAYS = "FROM unnest($2::int8[], $3::float8[], $4::float8[]) AS u(s, e, p)"
_ROWS = ("id", "starts", "energy", "power")
# Each statement with the names of its parameters ($1, $2, … in that order).
_REPLACE: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "a": [
        (_REPLACE_ROWS.format(s="v_a", extra="", values="", moved=""), _ROWS),
        (
            "INSERT INTO v_a.reading_changes"
            " (system_id, start_s, account_id, environment, txid, energy_wh, power_w)"
            " SELECT $1, u.s, $5, 'live', pg_current_xact_id()::text::bigint, u.e, u.p "
            + _ARRAYS
            + " ON CONFLICT (system_id, start_s) DO UPDATE SET seq = nextval('v_a.seq'),"
            " txid = excluded.txid, energy_wh = excluded.energy_wh, power_w = excluded.power_w",
            (*_ROWS, "account"),
        ),
    ],
    "b": [
        (_REPLACE_ROWS.format(s="v_b", extra="", values="", moved=""), _ROWS),
        (
            "INSERT INTO v_b.reading_changes (system_key, start_s, stream, txid, energy_wh,"
            " power_w) SELECT $1, u.s, 1, pg_current_xact_id()::text::bigint, u.e, u.p "
            + _ARRAYS
            + " ON CONFLICT (system_key, start_s) DO UPDATE SET seq = nextval('v_b.seq'),"
            " txid = excluded.txid, energy_wh = excluded.energy_wh, power_w = excluded.power_w",
            ("key", "starts", "energy", "power"),
        ),
    ],
    "c": [
        (
            _REPLACE_ROWS.format(
                s="v_c",
                extra=", stream, txid",
                values=", 1, pg_current_xact_id()::text::bigint",
                moved=", txid = excluded.txid, seq = nextval('v_c.seq')",
            ),
            _ROWS,
        ),
    ],
    "d": [
        (
            "INSERT INTO v_d.change_batches (stream, txid, system_id, lo_s, hi_s)"
            " VALUES (1, pg_current_xact_id()::text::bigint, $1, $2, $3)",
            ("id", "lo", "hi"),
        ),
        (
            _REPLACE_ROWS.format(
                s="v_d",
                extra=", batch",
                values=", currval('v_d.seq')",
                moved=", batch = excluded.batch",
            ),
            _ROWS,
        ),
    ],
}


async def elsewhere(
    conns: dict[str, asyncpg.Connection], rounds: int, replaced: dict[str, list[str]]
) -> None:
    """Small uploads (4 new quarter-hours, `rounds` per design) and replacements of 10,000
    stored quarter-hours (one per system in `replaced`), the designs alternated."""
    admin = conns["a"]
    # 100 preloaded systems of account 0's and others' streams, each after its last reading.
    picked = await admin.fetch(
        f"SELECT id, key FROM v_a.systems WHERE key <= {SYSTEMS} ORDER BY key LIMIT 100"  # noqa: S608
    )
    nexts = {
        v: {
            r["id"]: int(
                await conns[v].fetchval(
                    f"SELECT max(start_s) FROM v_{v}.readings WHERE system_id = $1",  # noqa: S608
                    r["id"],
                )
            )
            + 900
            for r in picked
        }
        for v in VARIANTS
    }
    statements = {
        v: await conns[v].prepare(_SMALL_HEAD.format(s=f"v_{v}") + _SMALL[v]) for v in VARIANTS
    }
    small: dict[str, list[tuple[float, int]]] = {v: [] for v in VARIANTS}
    energy = [100.0, 110.0, 120.0, 130.0]
    power = [400.0, 440.0, 480.0, 520.0]
    for r in range(rounds):
        system_id = picked[r % len(picked)]["id"]
        for v in VARIANTS[r % 4 :] + VARIANTS[: r % 4]:
            lo = nexts[v][system_id] + (3600 - nexts[v][system_id] % 3600) % 3600
            starts = [lo + i * 900 for i in range(4)]
            nexts[v][system_id] = lo + 3600
            before = await _wal_position(conns[v])
            began = time.perf_counter()
            done = await statements[v].fetchval(
                system_id, starts, energy, power, lo, starts[-1], lo, 460.0, 520.0
            )
            took = time.perf_counter() - began
            after = await _wal_position(conns[v])
            assert done == lo, (v, done)
            small[v].append((took, after - before))
    print(f"\nSmall uploads (4 new quarter-hours in one statement, {rounds} per design), "
          f"load {_load()}:")  # fmt: skip
    for v in VARIANTS:
        print(f"  {NAMES[v]}: median {statistics.median(t for t, _ in small[v]) * 1000:.2f} ms, "
              f"WAL {statistics.median(w for _, w in small[v]):,.0f} B")  # fmt: skip

    batch = _batch()
    times: dict[str, list[tuple[float, int]]] = {v: [] for v in VARIANTS}
    count = min(len(ids) for ids in replaced.values())
    for r in range(count):
        for v in VARIANTS[r % 4 :] + VARIANTS[: r % 4]:
            system_id = replaced[v][r]
            conn = conns[v]
            key, account = await conn.fetchrow(
                f"SELECT key, account_id FROM v_{v}.systems WHERE id = $1", system_id  # noqa: S608
            )  # fmt: skip
            values: dict[str, Any] = {
                "id": system_id, "starts": batch.starts, "energy": batch.energy + 1 + r,
                "power": batch.power, "account": account, "key": key,
                "lo": int(batch.starts.min()), "hi": int(batch.starts.max()),
            }  # fmt: skip
            before = await _wal_position(conn)
            began = time.perf_counter()
            async with conn.transaction():
                for statement, names in _REPLACE[v]:
                    await conn.execute(statement, *(values[n] for n in names))
            took = time.perf_counter() - began
            after = await _wal_position(conn)
            times[v].append((took, after - before))
    print(f"\nReplacing 10,000 stored quarter-hours (one transaction, {count} per design), "
          f"load {_load()}:")  # fmt: skip
    for v in VARIANTS:
        print(f"  {NAMES[v]}: median {statistics.median(t for t, _ in times[v]) * 1000:.1f} ms, "
              f"WAL {statistics.median(w for _, w in times[v]) / 1024:,.0f} KiB")  # fmt: skip


# --- the feed's page -------------------------------------------------------------------------

_HORIZON = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_PACK_TEXT_ID = (
    "convert_to(system_id, 'UTF8') || decode(repeat('00', 40 - octet_length(system_id)), 'hex')"
)
_PACK = (
    " || int8send(start_s) || float8send(energy_wh)"
    " || float8send(coalesce(power_w, 'NaN'::float8)) || int8send(txid) || int8send(seq)"
)


def _page(where: str, table: str, key: str) -> str:
    """The feed's page as `db/postgres.py` reads it, on `table` (a log or readings)."""
    packed = (_PACK_TEXT_ID if key == "system_id" else "int8send(system_key)") + _PACK
    return f"""
WITH page AS MATERIALIZED (
    SELECT {key}, start_s, energy_wh, power_w, txid, seq FROM {table}
    WHERE {where} AND (txid, seq) > ($2::bigint, $3::bigint) AND txid < {_HORIZON}
    ORDER BY txid, seq LIMIT $4
), last AS (
    SELECT txid, seq FROM page UNION ALL SELECT $2::bigint, $3::bigint
    ORDER BY txid DESC, seq DESC LIMIT 1
)
SELECT (SELECT string_agg({packed}, ''::bytea) FROM page), EXISTS (
    SELECT 1 FROM {table} WHERE {where} AND (txid, seq) > (SELECT txid, seq FROM last)
)"""  # noqa: S608 - constants


# D: the batches after the cursor in (txid, seq) order, each batch's rows from readings by
# its system's (system_id, start_s) range, those still written by it (`batch`); a page may
# end inside a batch, so its cursor is (txid, seq, start_s).
_PAGE_D = f"""
WITH page AS MATERIALIZED (
    SELECT b.system_id, r.start_s, r.energy_wh, r.power_w, b.txid, b.seq
    FROM v_d.change_batches b CROSS JOIN LATERAL (
        SELECT start_s, energy_wh, power_w FROM v_d.readings r
        WHERE r.system_id = b.system_id AND r.start_s >= b.lo_s AND r.start_s <= b.hi_s
          AND r.batch = b.seq ORDER BY r.start_s
    ) r
    WHERE b.stream = $1 AND (b.txid, b.seq) > ($2::bigint, $3::bigint) AND b.txid < {_HORIZON}
    ORDER BY b.txid, b.seq, r.start_s LIMIT $4
), last AS (
    SELECT txid, seq FROM page UNION ALL SELECT $2::bigint, $3::bigint
    ORDER BY txid DESC, seq DESC LIMIT 1
)
SELECT (SELECT string_agg({_PACK_TEXT_ID}{_PACK}, ''::bytea) FROM page), EXISTS (
    SELECT 1 FROM v_d.change_batches WHERE stream = $1
      AND (txid, seq) > (SELECT txid, seq FROM last)
)"""  # noqa: S608 - constants

_PAGES = {
    "a": _page("account_id = $1 AND environment = 'live'", "v_a.reading_changes", "system_id"),
    "b": _page("stream = $1::bigint", "v_b.reading_changes", "system_key"),
    "c": _page("stream = $1::bigint", "v_c.readings", "system_id"),
    "d": _PAGE_D,
}
_RECORD = {"a": 40 + 40, "b": 8 + 40, "c": 40 + 40, "d": 40 + 40}


# --- the W1 read -----------------------------------------------------------------------------

_DAY = """
SELECT string_agg(int8send(start_s) || float8send(energy_wh)
    || float8send(coalesce(power_w, 'NaN'::float8)), ''::bytea)
FROM (SELECT start_s, energy_wh, power_w FROM {s}.readings
      WHERE system_id = $1 AND start_s >= $2 AND start_s < $3 ORDER BY start_s) r
"""


async def _sizes(conn: asyncpg.Connection, v: str) -> dict[str, float]:
    s = f"v_{v}"
    rows = await conn.fetchval(f"SELECT count(*) FROM {s}.readings")  # noqa: S608
    out: dict[str, float] = {}
    tables = {
        "readings": "readings",
        "log": {"a": "reading_changes", "b": "reading_changes", "d": "change_batches"}.get(v),
        "hours": "reading_hours",
    }
    for name, table in tables.items():
        if table is None:
            out[name] = 0.0
            continue
        size = await conn.fetchval(
            "SELECT coalesce((SELECT sum(pg_total_relation_size(relid))"
            " FROM pg_partition_tree($1::regclass)), pg_total_relation_size($1::regclass))",
            f"{s}.{table}",
        )
        out[name] = float(size) / rows
    out["all"] = sum(out.values())
    return out


def _estimate(api: ApiUploads, results: dict[str, list[Upload]]) -> None:
    """The API's readings/s for each design. The HTTP upload's database time comes from
    PostgreSQL's own log of its statements (`log_min_duration_statement = 0` on its database):
    the API's own time is the wall time minus it (its buffers, built between the statements,
    stay in it). Each design then takes the API's own time less E's buffers, plus its own
    buffers and its database time; "scaled": that database time × (the real upload's ÷ E's),
    where the scratch transaction and the service's differ on the same empty tables."""
    walls, real = api.walls, api.database_times()
    print(f"\nHTTP uploads: {len(walls)} timed, {len(real)} found in PostgreSQL's log")
    pieces = {name: statistics.median(t.get(name, 0.0) for t in real) for name in real[0]}
    print("the service's database time per upload (PostgreSQL's log, medians, ms): "
          + ", ".join(f"{name} {value * 1000:.1f}" for name, value in pieces.items()))  # fmt: skip
    database = [sum(t.values()) for t in real][-len(walls) :]
    own = [w - d for w, d in zip(walls, database, strict=True)]
    empty = results["e"]
    scratch_e = statistics.median(u.database for u in empty)
    scale = statistics.median(database) / scratch_e
    base = statistics.median(own) - statistics.median(u.build for u in empty)
    print(f"HTTP upload: median {_ms(walls)} ms = {UPLOAD / statistics.median(walls):,.0f} "
          f"readings/s; its database time {_ms(database)} ms (E on scratch: "
          f"{scratch_e * 1000:.1f} ms, scale {scale:.2f}); the API's own {_ms(own)} ms "
          f"(medians of the uploads' differences), {base * 1000:.1f} without E's buffers")  # fmt: skip
    print("\n| design | database ms | buffers ms | API's own ms | estimated readings/s"
          " (unscaled / scaled) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for v in SCHEMAS:
        db = statistics.median(u.database for u in results[v])
        build = statistics.median(u.build for u in results[v])
        print(f"| {NAMES[v]} | {db * 1000:.1f} | {build * 1000:.1f} | {base * 1000:.1f} | "
              f"{UPLOAD / (base + build + db):,.0f} / "
              f"{UPLOAD / (base + build + db * scale):,.0f} |")  # fmt: skip


async def _print_sizes(conn: asyncpg.Connection, how: str) -> None:
    print(f"\n| design ({how}) | bytes per stored quarter-hour: readings | log | hourly rollups"
          " | all |")  # fmt: skip
    print("|---|---|---|---|---|")
    for v in VARIANTS:
        z = await _sizes(conn, v)
        print(f"| {NAMES[v]} | {z['readings']:.1f} | {z['log']:.1f} | {z['hours']:.1f} | "
              f"{z['all']:.1f} |")  # fmt: skip


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


async def measure(
    rounds: int,
    feed_repeats: int,
    day_reads: int,
    reindex: bool,
    api: ApiUploads | None = None,
    small_rounds: int = 0,
) -> None:
    _, url = _urls()
    print(f"measure: {rounds} rounds, load average {_load()}, {datetime.now(UTC):%H:%M} UTC")
    # JIT off for every design's connection: D's page is estimated far above `jit_above_cost`
    # (its rows per batch are unknown to the planner) and JIT-compiled it for ~1 s a page.
    conns = {v: await asyncpg.connect(url, server_settings={"jit": "off"}) for v in SCHEMAS}
    admin = conns["a"]
    await admin.execute("CHECKPOINT")
    fresh = {
        v: [
            r[0]
            for r in await conns[v].fetch(
                f"SELECT id FROM v_{v}.systems WHERE key > {SYSTEMS}"  # noqa: S608
                " AND last_reading_at IS NULL ORDER BY key"
            )
        ]
        for v in SCHEMAS
    }
    batch = _batch()
    results: dict[str, list[Upload]] = {v: [] for v in SCHEMAS}
    warm = 2
    for r in range(rounds + warm):
        order = [*SCHEMAS[r % 5 :], *SCHEMAS[: r % 5], *(["api"] if api else [])]
        for v in order[r % 2 :] + order[: r % 2]:
            if v == "api":
                assert api is not None
                api.send(r, timed=r >= warm)
                continue
            done = await upload(conns[v], v, fresh[v][r], batch)
            if r >= warm:
                results[v].append(done)
    print(f"uploads done, load average {_load()}, {datetime.now(UTC):%H:%M} UTC")
    print("\n| design | DB transaction ms (median / min) | statement | readings COPY | log COPY"
          " | hours COPY | commit | WAL KiB (median / min) | buffers built (API) ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for v in SCHEMAS:
        ups = results[v]
        pieces = {
            name: _ms([u.pieces.get(name, 0.0) for u in ups])
            for name in ("statement", "readings", "log", "hours", "commit")
        }
        db = [u.database for u in ups]
        wal = [u.wal / 1024 for u in ups]
        print(f"| {NAMES[v]} | {_ms(db)} / {min(db) * 1000:.1f} | {pieces['statement']} | "
              f"{pieces['readings']} | {pieces['log']} | {pieces['hours']} | {pieces['commit']} | "
              f"{statistics.median(wal):,.0f} / {min(wal):,.0f} | {_ms([u.build for u in ups])} |")  # fmt: skip
    if api is not None:
        _estimate(api, results)
    if small_rounds:
        timed = {v: fresh[v][warm : warm + min(10, rounds)] for v in VARIANTS}
        await elsewhere(conns, small_rounds, timed)

    # The feed: 10 uploads' rows (100,000), then account 0's preloaded hourly batches.
    first = {v: results[v][2].txid for v in VARIANTS}  # the page begins at the third upload
    stream_arg: dict[str, Any] = dict.fromkeys(VARIANTS, 1)
    stream_arg["a"] = await admin.fetchval("SELECT account_id FROM v_a.systems WHERE key = 1")
    small_rows = PER_SYSTEM * (SYSTEMS // ACCOUNTS)
    feed: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for _ in range(feed_repeats):
        for v in VARIANTS:
            for case, after, limit in (
                ("bulk", (first[v] - 1, 2**62), 10 * UPLOAD),
                ("hourly", (0, 0), small_rows),
            ):
                began = time.perf_counter()
                blob, _more = await conns[v].fetchrow(_PAGES[v], stream_arg[v], *after, limit)
                took = time.perf_counter() - began
                rows = len(blob or b"") // _RECORD[v]
                feed.setdefault((v, case), []).append((took, rows))
    print("\n| design | feed page of 10 uploads' rows: rows, ms, rows/s | page of hourly"
          " 4-row batches: rows, ms, rows/s |")  # fmt: skip
    print("|---|---|---|")
    for v in VARIANTS:
        cells = []
        for case in ("bulk", "hourly"):
            runs = feed[v, case]
            took = statistics.median(t for t, _ in runs)
            rows = max(n for _, n in runs)
            cells.append(f"{rows:,}, {took * 1000:.0f}, {rows / took:,.0f}")
        print(f"| {NAMES[v]} | {cells[0]} | {cells[1]} |")

    # W1: one system-day of 15m, the same random system-days for every design.
    rng = random.Random(34)
    keys = [rng.randrange(1, SYSTEMS + 1) for _ in range(day_reads)]
    ids = {r[0]: r[1] for r in await admin.fetch("SELECT key, id FROM v_a.systems")}
    days = [
        (ids[k], BASE + ((k - 1) % 4) * 30 * 86400 + rng.randrange(0, 30) * 86400) for k in keys
    ]
    day_times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    statements = {v: await conns[v].prepare(_DAY.format(s=f"v_{v}")) for v in VARIANTS}
    for r in range(3):
        for v in VARIANTS[r % 4 :] + VARIANTS[: r % 4]:
            for system_id, day in days:
                began = time.perf_counter()
                blob = await statements[v].fetchval(system_id, day, day + 86400)
                day_times[v].append(time.perf_counter() - began)
                assert len(blob) == 96 * 24, (v, len(blob))
    print(f"\nW1 (one system-day of 15m, {day_reads} system-days × 3 rounds), load {_load()}:")
    for v in VARIANTS:
        print(f"  {NAMES[v]}: median {statistics.median(day_times[v]) * 1e6:.0f} µs per read")

    await admin.execute("VACUUM ANALYZE")
    await _print_sizes(admin, "as written")
    if reindex:
        # The indexes rebuilt: the bytes of tables written in key order (as bulk uploads of
        # one system at a time write them), against the hourly uploads' interleaved splits.
        for v in VARIANTS:
            await admin.execute(f"REINDEX SCHEMA v_{v}")
        await _print_sizes(admin, "indexes rebuilt")
    print(f"\nload average {_load()}, {datetime.now(UTC):%H:%M} UTC")
    for c in conns.values():
        await c.close()


_PG_LOG = "/var/log/postgresql/postgresql-15-main.log"
_RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_DURATION = re.compile(r"\[(\d+)\] \S*@(\S+) .*?duration: ([\d.]+) ms")
_COPY = re.compile(r'COPY "?(\w+)"?')


@dataclass
class ApiUploads:
    """`upload_cpu.py bulk`'s HTTP upload (a fresh migrated database, one `solarapi serve`):
    the same 10,000 quarter-hours to the n-th new system, its wall time kept."""

    client: Any
    systems: list[tuple[str, str]]
    body: bytes
    database: str
    log: str
    offset: int
    walls: list[float] = field(default_factory=list)

    def send(self, n: int, *, timed: bool) -> None:
        began = time.perf_counter()
        answer = self.client.post(
            f"/api/v1/systems/{self.systems[n][0]}/readings", content=self.body
        )
        took = time.perf_counter() - began
        answer.raise_for_status()
        assert answer.json()["inserted"] == UPLOAD, answer.text
        if timed:
            self.walls.append(took)

    def database_times(self) -> list[dict[str, float]]:
        """Each bulk upload's statements in PostgreSQL's log, seconds by piece: from the
        transaction's BEGIN to its COMMIT, on one backend."""
        with open(self.log, encoding="utf-8", errors="replace") as f:
            f.seek(self.offset)
            records: list[str] = []
            for line in f:
                if _RECORD_START.match(line) or not records:
                    records.append(line)
                else:
                    records[-1] += line
        open_: dict[str, dict[str, float]] = {}
        begun: dict[str, float] = {}
        uploads = []
        for record in records:
            found = _DURATION.search(record)
            if found is None or found[2] != self.database:
                continue
            pid, took = found[1], float(found[3]) / 1000
            if "BEGIN" in record:
                begun[pid] = took
            elif "WITH present AS" in record:  # its parse (once), bind and execute
                if pid in open_ and set(open_[pid]) <= {"begin", "statement"}:
                    open_[pid]["statement"] += took
                else:
                    open_[pid] = {"begin": begun.pop(pid, 0.0), "statement": took}
            elif pid in open_:
                copy = _COPY.search(record)
                name = copy[1] if copy else "commit" if "COMMIT" in record else "other"
                open_[pid][name] = open_[pid].get(name, 0.0) + took
                if name == "commit":
                    done = open_.pop(pid)
                    if "reading_changes" in done:
                        uploads.append(done)
        return uploads


@contextmanager
def _api_uploads(count: int, log: str) -> Iterator[ApiUploads]:
    import httpx
    import orjson
    from upload_cpu import _systems

    from harness import fresh_database, make_account, server_process

    rows = _batch()
    body = orjson.dumps(
        {"readings": [
            {"timestamp": datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "energy_wh": float(e), "power_w": float(p)}
            for t, e, p in zip(rows.starts, rows.energy, rows.power, strict=True)
        ]}
    )  # fmt: skip
    with fresh_database("upload_logdesign", "postgres") as db:
        name = db.env["SOLARAPI_DATABASE_URL"].rsplit("/", 1)[1]

        async def log_statements() -> None:
            admin = await asyncpg.connect(_urls()[0])
            await admin.execute(f'ALTER DATABASE "{name}" SET log_min_duration_statement = 0')
            await admin.close()

        asyncio.run(log_statements())
        _, keys = asyncio.run(make_account(db.settings, 1))
        env = {**db.env, "SOLARAPI_RATE_LIMIT_SCALE": "100000"}
        with server_process(env) as (base, _):
            headers = {"Authorization": f"Bearer {keys[0]}", "Content-Type": "application/json"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                systems = _systems(client, count)
                yield ApiUploads(client, systems, body, name, log, os.path.getsize(log))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("setup")
    p.add_argument("--uploads", type=int, default=40, help="rounds the database has room for")
    p = sub.add_parser("measure")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--feed-repeats", type=int, default=5)
    p.add_argument("--day-reads", type=int, default=300)
    p.add_argument("--reindex", action="store_true", help="sizes again with rebuilt indexes")
    p.add_argument("--api", action="store_true", help="HTTP uploads alternated with the designs")
    p.add_argument("--pg-log", default=_PG_LOG, help="the server's log (for --api)")
    p.add_argument(
        "--elsewhere", type=int, default=0, help="small uploads per design (then 10 replacements)"
    )
    sub.add_parser("drop")
    args = parser.parse_args()
    if args.command == "setup":
        asyncio.run(setup(args.uploads))
    elif args.command == "measure" and args.api:
        with _api_uploads(args.rounds + 2, args.pg_log) as api:
            asyncio.run(
                measure(
                    args.rounds, args.feed_repeats, args.day_reads, args.reindex, api,
                    args.elsewhere,
                )
            )  # fmt: skip
    elif args.command == "measure":
        asyncio.run(
            measure(
                args.rounds, args.feed_repeats, args.day_reads, args.reindex, None, args.elsewhere
            )
        )  # fmt: skip
    else:
        asyncio.run(drop())


if __name__ == "__main__":
    main()
