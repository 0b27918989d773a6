"""The change feed's batch-level log (`change_batches`, migration 0021), on both databases:
a page that ends inside a batch, replacements moving rows to a new batch, a write across
months, version-1 cursors (before 0021) translated, and the migration of a log that holds
data — a cursor issued before it continues exactly."""

from __future__ import annotations

import asyncio
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from solarapi.changes import cursor
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import downgrade, upgrade
from tests.changes.test_feed import follow
from tests.support import (
    Tenant,
    client_for,
    execute_sql,
    make_tenant,
    running_app,
)
from tests.systems.factories import create_system, quarter_series, upload

JUNE = datetime(2025, 6, 15, tzinfo=UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _batches(app: FastAPI, system_id: str) -> list[tuple[int, int, int, int]]:
    """The system's batch rows: (`txid`, `seq`, `lo_s`, `hi_s`) in feed order."""
    async with app.state.engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT txid, seq, lo_s, hi_s FROM change_batches WHERE system_id = :id"
                " ORDER BY txid, seq, lo_s"
            ),
            {"id": system_id},
        )
        return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]


async def _batch_of(app: FastAPI, system_id: str) -> dict[int, int]:
    """`start_s` → `batch` of the system's readings."""
    async with app.state.engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT start_s, batch FROM readings WHERE system_id = :id"), {"id": system_id}
        )
        return {int(start): int(batch) for start, batch in rows}


def v1_cursor(app: FastAPI, tenant: Tenant, txid: int, seq: int) -> str:
    """A cursor as issued before migration 0021: (`txid`, `seq`) alone, version 1."""
    payload = struct.pack(">Bqqq", 1, txid, seq, int(datetime.now(UTC).timestamp()))
    secret = app.state.settings.effective_secret_key
    return cursor._text(payload + cursor._mac(secret, tenant.account_id, "live", payload))


async def test_a_page_ends_inside_a_batch_and_a_replacement_moves_rows_to_a_new_one(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        assert (await upload(client, system_id, quarter_series(JUNE, 10, 5))).status_code == 200
        ((_, first, lo, hi),) = await _batches(app, system_id)
        assert (lo, hi) == (int(JUNE.timestamp()), int(JUNE.timestamp()) + 9 * 900)
        assert set((await _batch_of(app, system_id)).values()) == {first}

        # Pages of 3 end inside the batch; each goes on after the last row it delivered. On
        # PostgreSQL the batch is held back (empty pages with `has_more`) while any older
        # transaction of the server is open, another test's included: asked again then.
        pages, token, pause = [], None, 0.05
        while True:
            params: dict[str, Any] = {"limit": 3}
            if token is not None:
                params["cursor"] = token
            body = (await client.get("/api/v1/readings/changes", params=params)).json()
            if body["data"]:
                pages.append([row["timestamp"] for row in body["data"]])
            token = body["next_cursor"]
            if not body["has_more"]:
                break
            if not body["data"]:
                await asyncio.sleep(pause)
                pause = min(2 * pause, 1.0)
        stamps = [_stamp(JUNE + timedelta(minutes=15 * i)) for i in range(10)]
        assert [len(page) for page in pages] == [3, 3, 3, 1]
        assert [stamp for page in pages for stamp in page] == stamps
        after_all = token

        # A cursor inside the batch (after its 3rd row), then two of the later rows replaced:
        # they leave the first batch for a new one, delivered after it with the new values.
        # (The batch is below the horizon now, and the horizon only moves on: deterministic.)
        inside = (await client.get("/api/v1/readings/changes", params={"limit": 3})).json()
        assert len(inside["data"]) == 3
        replaced = quarter_series(JUNE + timedelta(minutes=15 * 5), 2, 77)
        assert (await upload(client, system_id, replaced)).status_code == 200
        batches = await _batches(app, system_id)
        assert len(batches) == 2
        second = batches[1][1]
        assert second > first
        moved = {start for start, batch in (await _batch_of(app, system_id)).items()
                 if batch == second}  # fmt: skip
        assert moved == {int(JUNE.timestamp()) + 900 * i for i in (5, 6)}

        rest, _ = await follow(client, inside["next_cursor"])
        assert [(row["timestamp"], row["energy_wh"]) for row in rest] == [
            *((stamps[i], 5.0) for i in (3, 4, 7, 8, 9)),  # the first batch, less the moved
            (stamps[5], 77.0),
            (stamps[6], 77.0),
        ]
        # A client that had everything gets the two replaced rows alone.
        tail, _ = await follow(client, after_all)
        assert [(row["timestamp"], row["energy_wh"]) for row in tail] == [
            (stamps[5], 77.0),
            (stamps[6], 77.0),
        ]
        # And from the start: every stored reading once, at its latest value.
        everything, _ = await follow(client)
        assert len(everything) == 10


async def test_a_write_across_months_is_one_position_read_in_time_order(
    app: FastAPI, enterprise: Tenant
) -> None:
    end_of_june = datetime(2025, 6, 30, 23, 0, tzinfo=UTC)
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        response = await upload(client, system_id, quarter_series(end_of_june, 8, 3))
        assert response.status_code == 200, response.text
        batches = await _batches(app, system_id)
        # PostgreSQL: one batch row per month (its partitions), the same position;
        # SQLite: one row.
        july = int(datetime(2025, 7, 1, tzinfo=UTC).timestamp())
        june_s = int(end_of_june.timestamp())
        if app.state.settings.is_sqlite:
            assert [(lo, hi) for _, _, lo, hi in batches] == [(june_s, june_s + 7 * 900)]
        else:
            assert [(lo, hi) for _, _, lo, hi in batches] == [
                (june_s, july - 900),
                (july, june_s + 7 * 900),
            ]
            assert len({(txid, seq) for txid, seq, _, _ in batches}) == 1
        rows, _ = await follow(client, limit=3)
    assert [row["timestamp"] for row in rows] == [
        _stamp(end_of_june + timedelta(minutes=15 * i)) for i in range(8)
    ]


async def test_a_version_1_cursor_is_read_as_a_position_in_its_run(
    app: FastAPI, enterprise: Tenant
) -> None:
    # A version-1 cursor names a reading's position in the old log; migration 0021 made each
    # run of it a batch at its first row's `seq` (the migration test below has real ones).
    # Here the batches' own positions stand in for such runs: (`txid`, `seq`) is after the
    # batch's first quarter-hour.
    async with client_for(app, enterprise.live) as client:
        system_id = (await create_system(client))["id"]
        await upload(client, system_id, quarter_series(JUNE, 4, 1))
        await upload(client, system_id, quarter_series(JUNE + timedelta(hours=1), 4, 2))
        (txid, seq, _, _), _ = await _batches(app, system_id)
        old = v1_cursor(app, enterprise, txid, seq)
        assert len(old) == 55
        rows, token = await follow(client, old)
        assert [row["timestamp"] for row in rows] == [
            _stamp(JUNE + timedelta(minutes=15 * i)) for i in range(1, 8)
        ]
        assert len(token) == 66  # answered with a version-2 cursor
        everything, _ = await follow(client, v1_cursor(app, enterprise, 0, 0))
        assert [row["energy_wh"] for row in everything] == [1.0] * 4 + [2.0] * 4
        # Bound to its account and environment like any cursor.
        other = await make_tenant(app, Plan.ENTERPRISE)
        foreign = v1_cursor(app, other, txid, seq)
        refused = await client.get("/api/v1/readings/changes", params={"cursor": foreign})
        assert refused.status_code == 400


# --- the migration, on a database that holds data ----------------------------------------

BEFORE = "0020_auth_epoch"


async def test_the_migration_converts_the_log_and_old_cursors_continue_exactly(
    blank_database: Settings,
) -> None:
    settings = blank_database
    # The data is written by today's code at the head, then the database goes down to 0020
    # with it: a log of one row per reading, as the code before 0021 kept it.
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            one = (await create_system(client))["id"]
            two = (await create_system(client))["id"]
            await upload(client, one, quarter_series(JUNE, 6, 1))
            await upload(client, two, quarter_series(JUNE, 3, 2))
            await upload(client, one, quarter_series(JUNE + timedelta(minutes=30), 2, 3))
    await asyncio.to_thread(downgrade, settings, BEFORE)
    old_log = await execute_sql(
        settings,
        "SELECT txid, seq, system_id, start_s, energy_wh FROM reading_changes"  # noqa: S608
        f" WHERE account_id = '{tenant.account_id}' ORDER BY txid, seq",
    )
    assert len(old_log) == 9  # a row per stored reading
    assert len({(txid, seq) for txid, seq, *_ in old_log}) == 9
    # A client's cursor may name a row replaced since: the old code moved it to a new
    # position (the newest transaction's, the next `seq`), leaving a gap in its run. `two`'s
    # second quarter-hour moves so.
    moved_seq, last_txid = old_log[5][1], old_log[-1][0]
    await execute_sql(
        settings,
        f"UPDATE reading_changes SET txid = {last_txid}, seq = (SELECT max(seq) + 1"  # noqa: S608
        f" FROM reading_changes) WHERE seq = {moved_seq}",
    )
    await execute_sql(
        settings,
        "UPDATE sqlite_sequence SET seq = (SELECT max(seq) FROM reading_changes)"
        " WHERE name = 'reading_changes'"
        if settings.is_sqlite
        else "SELECT setval('reading_changes_seq_seq', (SELECT max(seq) FROM reading_changes))",
    )
    positions = [(0, 0)] + [(int(txid), int(seq)) for txid, seq, *_ in old_log]
    old_log = await execute_sql(
        settings,
        "SELECT txid, seq, system_id, start_s, energy_wh FROM reading_changes"  # noqa: S608
        f" WHERE account_id = '{tenant.account_id}' ORDER BY txid, seq",
    )

    await asyncio.to_thread(upgrade, settings)

    ((readings, without),) = await execute_sql(
        settings, "SELECT count(*), count(*) - count(batch) FROM readings"
    )
    assert (readings, without) == (9, 0)
    # The old log in runs: `one`'s first upload, less the two quarter-hours replaced later,
    # is two runs (its start_s jump there), `two`'s upload two (the gap its moved row left),
    # the replacement one, the moved row one.
    runs = await execute_sql(
        settings,
        "SELECT lo_s, hi_s FROM change_batches"  # noqa: S608
        f" WHERE account_id = '{tenant.account_id}' ORDER BY txid, seq",
    )
    june = int(JUNE.timestamp())
    assert [(lo - june, hi - june) for lo, hi in runs] == [
        (0, 900), (3600, 4500), (0, 0), (1800, 1800), (1800, 2700), (900, 900)
    ]  # fmt: skip
    async with running_app(settings) as app, client_for(app, tenant.live) as client:
        # From every position an old cursor could hold: exactly the old log's rows after
        # it, in its order.
        # (the moved row's old position included).
        for txid, seq in positions:
            rows, _ = await follow(client, v1_cursor(app, tenant, txid, seq), limit=2)
            assert [(row["system_id"], row["timestamp"], row["energy_wh"]) for row in rows] == [
                (system_id, _stamp(datetime.fromtimestamp(start, UTC)), energy)
                for row_txid, row_seq, system_id, start, energy in old_log
                if (int(row_txid), int(row_seq)) > (txid, seq)
            ], (txid, seq)
        # New writes take positions after every converted one.
        _, token = await follow(client, v1_cursor(app, tenant, *old_log[-1][:2]))
        await upload(client, two, quarter_series(JUNE, 1, 9))
        rows, _ = await follow(client, token)
        assert [(row["system_id"], row["energy_wh"]) for row in rows] == [(two, 9.0)]
    ((newest,),) = await execute_sql(settings, "SELECT max(seq) FROM change_batches")
    assert int(newest) > max(int(seq) for _, seq, *_ in old_log)


# --- the way down ----------------------------------------------------------------------------


@pytest.mark.parametrize("systems_left", [1, 0])
async def test_a_downgrade_puts_every_reading_and_every_later_write_after_every_cursor(
    blank_database: Settings, systems_left: int
) -> None:
    """Cursors issued since 0021 (version 2) are not readable by the release before it (it
    answers them 400 `validation`, "start again without a cursor": docs/operations.md). What
    the downgrade must keep is the old release's own promise to its version-1 cursors: every
    stored reading is in the log once, with its values, after every position a cursor can
    hold, and the old release's next write takes a position after them too (re-delivered,
    never skipped)."""
    settings = blank_database
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        async with client_for(app, tenant.live) as client:
            systems = [(await create_system(client))["id"] for _ in range(2)]
            await upload(client, systems[0], quarter_series(JUNE, 4, 1))
            await upload(client, systems[1], quarter_series(JUNE, 3, 2))
            await upload(client, systems[0], quarter_series(JUNE, 1, 5))  # a replacement
            ((issued,),) = await execute_sql(settings, "SELECT max(seq) FROM change_batches")
            copy_rows, token = await follow(client)
            # A deleted system's batches go with it: none left when both are deleted.
            for system_id in systems[systems_left:]:
                deleted = await client.delete(f"/api/v1/systems/{system_id}")
                assert deleted.status_code == 204, deleted.text
    stored = await execute_sql(
        settings, "SELECT system_id, start_s, energy_wh FROM readings ORDER BY system_id, start_s"
    )
    assert len(stored) == 4 * systems_left

    await asyncio.to_thread(downgrade, settings, BEFORE)

    log = await execute_sql(
        settings, "SELECT seq, system_id, start_s, energy_wh FROM reading_changes ORDER BY seq"
    )
    assert sorted((s, t, e) for _, s, t, e in log) == sorted(stored)
    assert all(int(seq) > int(issued) for seq, *_ in log)
    # The old release's writer takes the log's next `seq` (its default): above every
    # position issued, also when no batch was left to carry the counter down.
    await execute_sql(
        settings,
        "INSERT INTO reading_changes (system_id, start_s, account_id, environment, txid,"  # noqa: S608
        f" energy_wh) VALUES ('sys_probe', 0, '{tenant.account_id}', 'live', 0, 1.0)",
    )
    ((probe,),) = await execute_sql(
        settings, "SELECT seq FROM reading_changes WHERE system_id = 'sys_probe'"
    )
    assert int(probe) > max([int(issued)] + [int(seq) for seq, *_ in log])
    await execute_sql(settings, "DELETE FROM reading_changes WHERE system_id = 'sys_probe'")

    # Up again: a cursor issued before the downgrade is read as a position before the
    # rebuilt log's rows (re-delivered, never skipped), so a client that follows it still
    # ends with exactly the stored readings.
    await asyncio.to_thread(upgrade, settings)
    async with running_app(settings) as app, client_for(app, tenant.live) as client:
        rows, _ = await follow(client, token)
        fresh, _ = await follow(client)
    copy = {(row["system_id"], row["timestamp"]): row["energy_wh"] for row in copy_rows}
    copy = {key: value for key, value in copy.items() if key[0] in systems[:systems_left]}
    copy.update({(row["system_id"], row["timestamp"]): row["energy_wh"] for row in rows})
    assert copy == {
        (system_id, _stamp(datetime.fromtimestamp(start, UTC))): energy
        for system_id, start, energy in stored
    }
    assert len(fresh) == len(stored)
