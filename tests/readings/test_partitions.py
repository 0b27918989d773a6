"""`readings` partitioned by month on PostgreSQL: the migration converts a table that holds
data, the daily job creates months ahead and retires them past retention, and every range
read of the readings area touches only the partitions of its range.

Each test has a scratch database of its own: dropping months of the suite's shared database
would take other tests' readings with it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Select, bindparam, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, sessionmaker_for
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from solarapi.models.readings import Reading
from solarapi.readings import repository
from solarapi.readings.jobs import maintain_partitions
from solarapi.readings.partitions import (
    SCHEMA,
    AttachBusy,
    month_start,
    month_table,
    reading_partitions,
)
from solarapi.readings.store import RAW
from solarapi.readings.store_postgres import _packed
from tests.support import (
    TEST_SECRET,
    TestClock,
    client_for,
    database_url,
    make_tenant,
    need_service,
    postgres_available,
    run_cli,
    running_app,
    scratch_database,
    settings_env,
)
from tests.systems.factories import create_system

PARTITIONING = "0016_readings_partitions"


@pytest.fixture
async def pg(tmp_path: Path) -> AsyncIterator[Settings]:
    need_service("PostgreSQL", postgres_available())
    async with scratch_database() as name:
        yield Settings(data_dir=tmp_path, database_url=database_url(name), secret_key=TEST_SECRET)


async def _upgrade(settings: Settings, revision: str = "head") -> None:
    # Alembic runs its own event loop (`asyncio.run`): off this test's.
    await asyncio.to_thread(upgrade, settings, revision)


async def _execute(settings: Settings, *statements: str) -> list[list[tuple[object, ...]]]:
    """Run `statements` in one transaction; the rows of each (empty for a write)."""
    engine = create_oneshot_engine(settings)
    results: list[list[tuple[object, ...]]] = []
    try:
        async with engine.begin() as connection:
            for sql in statements:
                result = await connection.execute(text(sql))
                results.append(
                    [tuple(row) for row in result.fetchall()] if result.returns_rows else []
                )
    finally:
        await engine.dispose()
    return results


async def _partitions(settings: Settings) -> dict[str, int]:
    """Partition name → rows it holds."""
    (names,) = await _execute(
        settings,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'public.readings'::regclass ORDER BY 1",
    )
    counts = {}
    for (name,) in names:
        ((count,),) = (await _execute(settings, f"SELECT count(*) FROM {SCHEMA}.{name}"))[0]  # noqa: S608
        counts[str(name)] = int(str(count))
    return counts


# The schema of revision 0008 is fixed for ever, so raw SQL can fill it.
_ACCOUNT_0008 = (
    "INSERT INTO accounts (id, name, plan, created_at) VALUES ('acct_p', 'P', 'enterprise', now())"
)
_SYSTEM_0008 = (
    "INSERT INTO systems (id, account_id, environment, name, status, data_source, capacity_kwp,"
    " latitude, longitude, timezone, tilt_deg, azimuth_deg, created_at, updated_at)"
    " VALUES ('sys_p', 'acct_p', 'live', 'P', 'active', 'metered', 10, 52, 5,"
    " 'Europe/Amsterdam', 30, 180, now(), now())"
)


async def _system_at_head(settings: Settings) -> str:
    """A system made through the API, on the database migrated to head (whatever columns
    systems have by now); returns its id."""
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            return str((await create_system(client))["id"])


def _quarter_hours(first: datetime, count: int, system_id: str = "sys_p") -> str:
    start = int(first.timestamp())
    rows = ", ".join(f"('{system_id}', {start + 900 * i}, {i}.5, NULL)" for i in range(count))
    return f"INSERT INTO readings (system_id, start_s, energy_wh, power_w) VALUES {rows}"  # noqa: S608


@pytest.mark.services
async def test_the_migration_keeps_the_rows_of_a_table_that_holds_data(pg: Settings) -> None:
    await _upgrade(pg, "0008_draft_without_readings")
    await _execute(pg, _ACCOUNT_0008, _SYSTEM_0008)
    year_ago = month_start(datetime.now(UTC), -12)
    await _execute(pg, _quarter_hours(year_ago, 2000))

    await _upgrade(pg, PARTITIONING)

    parts = await _partitions(pg)
    # Everything that was there is in the table from before the cut-over, untouched.
    assert parts.pop("before_cut_over") == 2000
    assert parts.pop("outside_every_month") == 0
    this_month = month_start(datetime.now(UTC))
    # Three months ahead have partitions of their own; this one is still the old table's.
    assert parts == {month_table(month_start(this_month, n)): 0 for n in (1, 2, 3)}
    ((count, total),) = (
        await _execute(pg, "SELECT count(*), sum(energy_wh) FROM readings WHERE system_id='sys_p'")
    )[0]
    assert (count, total) == (2000, sum(i + 0.5 for i in range(2000)))

    # Deleting the system still cascades into every partition.
    await _execute(pg, _quarter_hours(this_month, 4))
    assert (await _partitions(pg))["before_cut_over"] == 2004
    await asyncio.to_thread(downgrade, pg, "0008_draft_without_readings")
    ((count,),) = (await _execute(pg, "SELECT count(*) FROM readings"))[0]
    assert count == 2004
    (kind,) = (await _execute(pg, "SELECT relkind::text FROM pg_class WHERE relname = 'readings'"))[
        0
    ]
    assert kind == ("r",)

    await _upgrade(pg)
    await _execute(pg, "DELETE FROM systems WHERE id = 'sys_p'")
    assert set((await _partitions(pg)).values()) == {0}


LOG_PARTITIONS = "0018_change_log_partitions"


async def _log_partitions(settings: Settings) -> dict[str, int]:
    """The change log's partition name → rows it holds."""
    (names,) = await _execute(
        settings,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'public.reading_changes'::regclass ORDER BY 1",
    )
    counts = {}
    for (name,) in names:
        ((count,),) = (await _execute(settings, f"SELECT count(*) FROM {SCHEMA}.{name}"))[0]  # noqa: S608
        counts[str(name)] = int(str(count))
    return counts


@pytest.mark.services
async def test_the_log_partitions_migration_keeps_every_row_and_goes_back(
    pg: Settings,
) -> None:
    """`0018_change_log_partitions` on a log that holds data: every row keeps its position
    (`txid`, `seq`) and values in the partition of everything before the cut-over, the
    sequence goes on past it, a deleted system's rows still go (no foreign key: the
    trigger), and the way down keeps every row."""
    # The system is made by today's code at the head; the database then goes down to 0017.
    await _upgrade(pg)
    system_id = await _system_at_head(pg)
    await asyncio.to_thread(downgrade, pg, "0017_system_data_version")
    year_ago = month_start(datetime.now(UTC), -12)
    await _execute(
        pg,
        _quarter_hours(year_ago, 1500, system_id),
        "INSERT INTO reading_changes (system_id, start_s, account_id, environment, txid,"  # noqa: S608
        " energy_wh, power_w) SELECT r.system_id, r.start_s, s.account_id, s.environment,"
        f" 7, r.energy_wh, r.power_w FROM readings r JOIN systems s ON s.id = r.system_id"
        f" WHERE r.system_id = '{system_id}' ORDER BY r.start_s",
    )
    (before,) = await _execute(
        pg,
        "SELECT system_id, start_s, txid, seq, energy_wh, power_w FROM reading_changes"
        " ORDER BY seq",
    )

    await _upgrade(pg, LOG_PARTITIONS)

    parts = await _log_partitions(pg)
    assert parts.pop("changes_before_cut_over") == 1500
    assert parts.pop("changes_outside_every_month") == 0
    this_month = month_start(datetime.now(UTC))
    assert parts == {f"changes_{month_table(month_start(this_month, n))}": 0 for n in (1, 2, 3)}
    (after,) = await _execute(
        pg,
        "SELECT system_id, start_s, txid, seq, energy_wh, power_w FROM reading_changes"
        " ORDER BY seq",
    )
    assert after == before
    (columns,) = await _execute(
        pg,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = 'reading_changes' ORDER BY 1",
    )
    assert [c for (c,) in columns] == [
        "account_id", "energy_wh", "environment", "power_w", "seq", "start_s", "system_id",
        "txid",
    ]  # fmt: skip
    (keys,) = await _execute(
        pg,
        "SELECT contype::text FROM pg_constraint"
        " WHERE conrelid = 'public.reading_changes'::regclass ORDER BY 1",
    )
    assert [k for (k,) in keys] == ["u"]  # the unique key; no primary or foreign key
    # New rows take positions after every old one, whichever partition they land in.
    ((seq,),) = (
        await _execute(
            pg,
            "INSERT INTO reading_changes (system_id, start_s, account_id, environment, txid,"  # noqa: S608
            f" energy_wh) VALUES ('{system_id}', {int(this_month.timestamp()) + 86400 * 40},"
            " 'a', 'live', 9, 0.25) RETURNING seq",
        )
    )[0]
    assert seq > max(int(str(row[3])) for row in before)

    # Down again: one table, every row with its values, the foreign key back.
    await asyncio.to_thread(downgrade, pg, "0017_system_data_version")
    ((count, total, relkind),) = (
        await _execute(
            pg,
            "SELECT count(*), sum(energy_wh), (SELECT relkind::text FROM pg_class"
            " WHERE relname = 'reading_changes') FROM reading_changes",
        )
    )[0]
    assert (count, total, relkind) == (1501, sum(i + 0.5 for i in range(1500)) + 0.25, "r")
    (down,) = await _execute(
        pg,
        "SELECT system_id, start_s, txid, seq, energy_wh, power_w FROM reading_changes"
        " WHERE txid = 7 ORDER BY seq",
    )
    assert down == before
    (keys,) = await _execute(
        pg,
        "SELECT contype::text FROM pg_constraint"
        " WHERE conrelid = 'public.reading_changes'::regclass ORDER BY 1",
    )
    assert [k for (k,) in keys] == ["f", "p", "u"]
    # (A reading that starts next month cannot be stored yet: the way up assumes none.)
    await _execute(pg, "DELETE FROM reading_changes WHERE txid = 9")

    await _upgrade(pg)
    # At the head the log is `change_batches` (0021), converted from these rows.
    ((batches,),) = (
        await _execute(
            pg,
            f"SELECT count(*) FROM change_batches WHERE system_id = '{system_id}'",  # noqa: S608
        )
    )[0]
    # One run: one system's 1,500 consecutive quarter-hours, logged in order by one
    # transaction within one month, so one batch holding all of them.
    assert batches == 1
    ((marked,),) = (
        await _execute(
            pg,
            "SELECT count(*) FROM readings r JOIN change_batches b ON b.seq = r.batch"  # noqa: S608
            f" AND b.system_id = r.system_id WHERE r.system_id = '{system_id}'",
        )
    )[0]
    assert marked == 1500
    await _execute(pg, f"DELETE FROM systems WHERE id = '{system_id}'")  # noqa: S608
    ((batches,),) = (await _execute(pg, "SELECT count(*) FROM change_batches"))[0]
    assert batches == 0


@pytest.mark.services
async def test_the_job_creates_months_ahead_moves_strays_and_drops_past_retention(
    pg: Settings,
) -> None:
    await _upgrade(pg)
    system_id = await _system_at_head(pg)
    now = datetime.now(UTC)
    this_month = month_start(now)
    far = month_start(now, 6)  # no partition yet: the default one takes it
    await _execute(
        pg,
        _quarter_hours(this_month, 8, system_id),
        _quarter_hours(far, 3, system_id),
        "INSERT INTO change_batches (system_id, lo_s, hi_s, account_id, environment, txid)"  # noqa: S608
        f" SELECT system_id, min(start_s), max(start_s), 'acct', 'live', 0 FROM readings"
        f" WHERE system_id = '{system_id}' AND start_s < {int(month_start(now, 1).timestamp())}"
        " GROUP BY system_id",
        "UPDATE readings SET batch = (SELECT max(seq) FROM change_batches)"  # noqa: S608
        f" WHERE system_id = '{system_id}' AND start_s < {int(month_start(now, 1).timestamp())}",
    )
    assert (await _partitions(pg))["outside_every_month"] == 3

    engine = create_oneshot_engine(pg)
    maker = sessionmaker_for(engine, pg)
    try:
        later = far + timedelta(days=3)
        done = await maintain_partitions(maker, later, None)
        assert done.created == tuple(month_table(month_start(far, n)) for n in range(4))
        assert done.moved_rows == 3
        assert done.dropped == ()
        parts = await _partitions(pg)
        assert parts["outside_every_month"] == 0
        assert parts[month_table(far)] == 3
        # Months in between stay missing until asked for: only now .. now + 3 are kept ahead.
        assert month_table(month_start(now, 5)) not in parts

        again = await maintain_partitions(maker, later, None)
        assert (again.created, again.dropped, again.moved_rows) == ((), (), 0)

        # Retention of 2 months, seen from `far`: this month and the next ones go whole.
        retired = await maintain_partitions(maker, later, 2)
        horizon = month_start(later, -2)
        # The horizon is `far` − 2 = this month + 4: months +1..+3 end by then, +6.. do not.
        assert horizon == month_start(this_month, 4)
        assert set(retired.dropped) == {
            "before_cut_over",
            *(month_table(month_start(this_month, n)) for n in (1, 2, 3)),
        }
        # The table from before the cut-over ends with next month: past the horizon too.
        assert "before_cut_over" in retired.dropped
        ((kept,),) = (await _execute(pg, "SELECT count(*) FROM readings"))[0]
        assert kept == 3  # the far month's rows are within retention; this month's are not
        # The change feed's batches of the dropped months went with them.
        ((logged,),) = (
            await _execute(
                pg,
                f"SELECT count(*) FROM change_batches WHERE system_id = '{system_id}'",  # noqa: S608
            )
        )[0]
        assert logged == 0
    finally:
        await engine.dispose()


@pytest.mark.services
async def test_on_a_fresh_install_history_uploaded_later_gets_months_of_its_own(
    pg: Settings,
) -> None:
    """Migrated while `readings` was empty, the table from before the cut-over holds nothing:
    the job retires it, so a backfill of history lands in the default partition and the next
    run moves it into months that retention can drop whole."""
    await _upgrade(pg)
    system_id = await _system_at_head(pg)
    now = datetime.now(UTC)
    assert (await _partitions(pg))["before_cut_over"] == 0
    engine = create_oneshot_engine(pg)
    maker = sessionmaker_for(engine, pg)
    try:
        await maintain_partitions(maker, now, None)
        assert "before_cut_over" not in await _partitions(pg)

        five_ago, two_ago = month_start(now, -5), month_start(now, -2)
        await _execute(
            pg, _quarter_hours(five_ago, 10, system_id), _quarter_hours(two_ago, 6, system_id)
        )
        assert (await _partitions(pg))["outside_every_month"] == 16

        # What an operator runs after a backfill instead of waiting for the daily job.
        ran = await asyncio.to_thread(run_cli, settings_env(pg), "readings", "partitions", "--json")
        done = json.loads(ran.stdout)
        assert set(done["created"]) >= {month_table(five_ago), month_table(two_ago)}
        assert done["moved_rows"] == 16
        parts = await _partitions(pg)
        assert (parts["outside_every_month"], parts[month_table(five_ago)]) == (0, 10)
        assert parts[month_table(two_ago)] == 6
        ((total,),) = (await _execute(pg, "SELECT sum(energy_wh) FROM readings"))[0]
        assert total == sum(i + 0.5 for i in range(10)) + sum(i + 0.5 for i in range(6))

        # Retention of 3 months drops the older month whole, and keeps the newer one.
        retired = await maintain_partitions(maker, now, 3)
        assert retired.dropped == (month_table(five_ago),)
        assert retired.purged_rows == 0
        assert month_table(five_ago) not in await _partitions(pg)
        ((kept,),) = (await _execute(pg, "SELECT count(*) FROM readings"))[0]
        assert kept == 6
    finally:
        await engine.dispose()


async def _waiting_for_a_lock(settings: Settings) -> int:
    """Backends of the database waiting for a lock (other than the asking one)."""
    ((waiting,),) = (
        await _execute(
            settings,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
        )
    )[0]
    return int(str(waiting))


@pytest.mark.services
async def test_an_upload_while_its_month_is_created_waits_and_lands_in_the_new_month(
    pg: Settings,
) -> None:
    """A backfill goes on while the job creates the months it lands in. Without the job's
    lock on the parents, the upload is routed to the default partition, waits for the
    default's lock while the month is attached, and then fails its changed constraint (a
    500, SQLSTATE 23514): the run that found it failed an upload this way. Here the upload is
    made to wait inside the job's transaction, every time, and must succeed after it."""
    await _upgrade(pg)
    engine = create_oneshot_engine(pg)
    maker = sessionmaker_for(engine, pg)
    now = datetime.now(UTC)
    history = month_start(now, -5)

    def quarter_hours(first: datetime, count: int) -> dict[str, object]:
        return {
            "readings": [
                {"timestamp": f"{first + timedelta(minutes=15 * i):%Y-%m-%dT%H:%M:%SZ}",
                 "energy_wh": 10.0 + i}
                for i in range(count)
            ]
        }  # fmt: skip

    try:
        await maintain_partitions(maker, now, None)  # a fresh install: the months from now on
        async with running_app(pg) as app:
            tenant = await make_tenant(app, Plan.ENTERPRISE)
            async with client_for(app, tenant.live) as client:
                system = str((await create_system(client))["id"])
                first = await client.post(
                    f"/api/v1/systems/{system}/readings", json=quarter_hours(history, 4)
                )
                assert first.status_code == 200, first.text
                assert (await _partitions(pg))["outside_every_month"] == 4

                async with maker() as session, session.begin():
                    done = await reading_partitions(session).maintain(session, now, None)
                    assert month_table(history) in done.created
                    assert done.moved_rows == 4
                    # The month is attached, not yet committed: the next upload of it waits.
                    upload = asyncio.create_task(
                        client.post(
                            f"/api/v1/systems/{system}/readings",
                            json=quarter_hours(history + timedelta(days=1), 8),
                        )
                    )
                    while not await _waiting_for_a_lock(pg):
                        assert not upload.done(), upload.result().text
                second = await upload
                assert second.status_code == 200, second.text
                listed = await client.get(
                    f"/api/v1/systems/{system}/readings",
                    params={
                        "from": f"{history:%Y-%m-%dT%H:%M:%SZ}",
                        "to": f"{history + timedelta(days=2):%Y-%m-%dT%H:%M:%SZ}",
                        "interval": "1d",
                    },
                )
        parts = await _partitions(pg)
        assert parts["outside_every_month"] == 0
        assert parts[month_table(history)] == 12
        totals = listed.json()["meta"]["totals"]
        assert totals["samples"] == 12
        assert totals["energy_wh"] == sum(10.0 + i for i in range(4)) + sum(
            10.0 + i for i in range(8)
        )
    finally:
        await engine.dispose()


@pytest.mark.services
async def test_creating_months_gives_up_behind_a_transaction_on_the_default_partition(
    pg: Settings,
) -> None:
    """A transaction that read the default partition (as an upload replacing readings does
    before it writes the log) holds it: the job must not wait for it (the two could deadlock,
    and PostgreSQL might abort the upload), but give up within its lock wait and leave the
    months for later, having done nothing; once the transaction ends, the months come."""
    await _upgrade(pg)
    system_id = await _system_at_head(pg)
    engine = create_oneshot_engine(pg)
    maker = sessionmaker_for(engine, pg)
    holder = create_oneshot_engine(pg)
    now = datetime.now(UTC)
    history = month_start(now, -4)
    try:
        await maintain_partitions(maker, now, None)
        await _execute(pg, _quarter_hours(history, 5, system_id))
        async with holder.begin() as held:
            await held.execute(text(f"SELECT count(*) FROM {SCHEMA}.outside_every_month"))  # noqa: S608
            with pytest.raises(AttachBusy):
                # (bounded: before the lock wait, the job waited here for ever)
                await asyncio.wait_for(maintain_partitions(maker, now, None, attempts=2), 300)
            parts = await _partitions(pg)
            assert month_table(history) not in parts
            assert parts["outside_every_month"] == 5
        done = await maintain_partitions(maker, now, None)
        assert done.created == (month_table(history),)
        assert done.moved_rows == 5
        parts = await _partitions(pg)
        assert (parts["outside_every_month"], parts[month_table(history)]) == (0, 5)
    finally:
        await engine.dispose()
        await holder.dispose()


@pytest.mark.services
async def test_the_empty_cut_over_is_not_waited_for_behind_a_long_transaction(
    pg: Settings,
) -> None:
    await _upgrade(pg)
    holder = create_oneshot_engine(pg)
    engine = create_oneshot_engine(pg)
    maker = sessionmaker_for(engine, pg)
    try:
        async with holder.begin() as held:
            # A reader in a long transaction: dropping a partition must wait for it.
            await held.execute(text("SELECT count(*) FROM readings"))
            async with maker() as session, session.begin():
                retired = await reading_partitions(session).retire_empty_cut_over(session)
            assert retired is False
            assert "before_cut_over" in await _partitions(pg)
        async with maker() as session, session.begin():
            assert await reading_partitions(session).retire_empty_cut_over(session) is True
        assert "before_cut_over" not in await _partitions(pg)
    finally:
        await engine.dispose()
        await holder.dispose()


async def _explain(settings: Settings, sql: str) -> str:
    ((plan,),) = (await _execute(settings, f"EXPLAIN (FORMAT JSON) {sql}"))[0]
    return str(plan)


def _scanned(plan: str) -> set[str]:
    return set(re.findall(r"'Relation Name': '([a-z0-9_]+)'", plan))


def _literal(query: Select[tuple[object, ...]], **values: object) -> str:
    bound = query.params(**values)
    return str(bound.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


@pytest.mark.services
async def test_every_range_read_of_readings_touches_only_its_months(pg: Settings) -> None:
    await _upgrade(pg)
    await _system_at_head(pg)
    # Next month: the first with a partition of its own.
    target = month_start(datetime.now(UTC), 1)
    lo = int(target.timestamp()) + 86_400
    hi = lo + 86_400

    ranged = _packed(RAW)._packed(bindparam("id"))
    existing = select(Reading.start_s).where(
        Reading.system_id == "sys_p", Reading.start_s >= lo, Reading.start_s <= hi
    )
    latest = (
        select(Reading.start_s, Reading.power_w)
        .where(Reading.system_id == "sys_p", Reading.start_s >= lo)
        .order_by(Reading.start_s.desc())
        .limit(1)
    )
    statements = {
        "range": _literal(ranged, id="sys_p", start=lo, end=hi),
        "existing starts": _literal(existing),
    }
    for name, sql in statements.items():
        assert _scanned(await _explain(pg, sql)) == {month_table(target)}, name
    # Bounded below by the stored last reading: never the months before it.
    later = _scanned(await _explain(pg, _literal(latest)))
    assert later == {month_table(month_start(target, n)) for n in range(3)} | {
        "outside_every_month"
    }

    # asyncpg runs prepared statements, whose generic plans prune when they start.
    engine = create_oneshot_engine(pg)
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SET plan_cache_mode = force_generic_plan"))
            await connection.execute(
                text(
                    "PREPARE r(text, bigint, bigint) AS SELECT energy_wh FROM readings"
                    " WHERE system_id = $1 AND start_s >= $2 AND start_s < $3"
                )
            )
            plan = "\n".join(
                str(row[0])
                for row in await connection.execute(
                    text(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE r('sys_p', {lo}, {hi})")
                )
            )
        scanned = set(re.findall(r"Scan .*? on (\w+)", plan))
        assert scanned == {month_table(target)}, plan
        assert "Subplans Removed: 4" in plan, plan  # of the 5: before, 3 months, default
    finally:
        await engine.dispose()


@pytest.mark.services
async def test_the_summary_reads_the_latest_reading_within_its_bound(pg: Settings) -> None:
    await _upgrade(pg)
    system_id = await _system_at_head(pg)
    this_month = month_start(datetime.now(UTC))
    await _execute(pg, _quarter_hours(this_month, 3, system_id))
    engine = create_oneshot_engine(pg)
    try:
        async with AsyncSession(engine) as session:
            last = int(this_month.timestamp()) + 1800
            assert await repository.latest_reading(session, system_id, last) == (last, None)
            assert await repository.latest_reading(session, system_id) == (last, None)
            assert await repository.latest_reading(session, system_id, last + 900) is None
    finally:
        await engine.dispose()


async def test_an_upload_before_the_retention_horizon_is_refused_and_stores_nothing(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET, readings_retention_months=2)
    await _upgrade(settings)
    clock = TestClock()
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)
    clock.pinned = now.timestamp()
    async with running_app(settings, clock) as app:
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
            readings = [
                {"timestamp": "2026-09-01T00:00:00Z", "energy_wh": 1.0},  # the horizon itself
                {"timestamp": "2026-08-31T23:45:00Z", "energy_wh": 1.0},  # before it
            ]
            refused = await client.post(
                f"/api/v1/systems/{system}/readings", json={"readings": readings}
            )
            kept = await client.post(
                f"/api/v1/systems/{system}/readings", json={"readings": readings[:1]}
            )
            listed = await client.get(
                f"/api/v1/systems/{system}/readings",
                params={
                    "from": "2026-08-31T00:00:00Z",
                    "to": "2026-09-02T00:00:00Z",
                    "interval": "1d",
                },
            )
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "validation"
    assert "readings[1].timestamp" in refused.json()["error"]
    assert "2026-09-01T00:00:00Z" in refused.json()["error"]
    assert kept.status_code == 200, kept.text
    assert listed.json()["meta"]["totals"]["samples"] == 1


async def test_retention_on_sqlite_deletes_the_rows_and_their_change_log(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
    await _upgrade(settings)
    system_id = await _system_at_head(settings)
    now = datetime.now(UTC)
    old, recent = month_start(now, -3), month_start(now)
    horizon_s = int(month_start(now, -2).timestamp())
    await _execute(
        settings,
        _quarter_hours(old, 5, system_id),
        _quarter_hours(recent, 2, system_id),
        # Two quarter-hours before the horizon and one after it: one chunk across it (the
        # raw quarter-hours' chunks are 2**16 s; a month's start is not on their grid).
        _quarter_hours(datetime.fromtimestamp(horizon_s - 1800, UTC), 3, system_id),
        # A batch per reading, and one across the horizon (a write of old and recent rows).
        "INSERT INTO change_batches (system_id, lo_s, hi_s, account_id, environment, txid)"  # noqa: S608
        f" SELECT system_id, start_s, start_s, 'acct', 'live', 0 FROM readings"
        f" WHERE system_id = '{system_id}'",
        "INSERT INTO change_batches (system_id, lo_s, hi_s, account_id, environment, txid)"  # noqa: S608
        f" VALUES ('{system_id}', {int(old.timestamp())}, {int(recent.timestamp())}, 'acct',"
        " 'live', 0)",
    )
    engine = create_oneshot_engine(settings)
    try:
        maker = sessionmaker_for(engine, settings)
        assert (await maintain_partitions(maker, now, None)).purged_rows == 0
        done = await maintain_partitions(maker, now, 2)
    finally:
        await engine.dispose()
    assert done.purged_rows == 7
    assert (done.created, done.dropped) == ((), ())
    counts = await _execute(
        settings,
        "SELECT count(*) FROM readings",
        "SELECT count(*) FROM change_batches WHERE hi_s >= lo_s",
        "SELECT min(lo_s) FROM change_batches",
        f"SELECT data_version FROM systems WHERE id = '{system_id}'",  # noqa: S608
        # Every chunk left packed (the SQL inserts' and the one across the horizon), one per
        # chunk of the rows kept, holding exactly them.
        "SELECT count(*) FROM reading_chunks WHERE quarters IS NULL",
        "SELECT count(*), sum(length(quarters)) / 24 FROM reading_chunks",
        "SELECT count(DISTINCT start_s >> 16) FROM readings",
    )
    # The recent rows' batches stay, the one across the horizon now starts at it; the
    # system's data changed: what was derived from it (a performance answer) is stale.
    chunks = counts[6][0][0]
    assert counts == [[(3,)], [(4,)], [(horizon_s,)], [(1,)], [(0,)], [(chunks, 3)], [(chunks,)]]
    assert chunks == 2


def test_the_setting_takes_whole_months(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path, readings_retention_months=13).readings_retention_months == 13
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings(data_dir=tmp_path, readings_retention_months=0)
