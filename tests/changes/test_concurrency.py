"""The change feed's guarantee under concurrent writes, on both databases: following the
cursor never skips a change — including one whose transaction was still open when an earlier
page was read — so the client's copy equals the stored readings at the end.

The outcome is deterministic (the copy must equal the database every time); what varies
between rounds is only how the writers and the reader interleave. No fixed sleeps: the
held-open transactions wait on events the reader sets.
"""

from __future__ import annotations

import asyncio
import os
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.kit.plans import Plan
from solarapi.models.readings import Reading
from solarapi.readings.upload import store_series
from solarapi.systems import repository as systems
from tests.changes.test_feed import as_copy
from tests.support import Tenant, client_for, make_tenant
from tests.systems.factories import create_system, iso, upload

JUNE = datetime(2025, 6, 15, tzinfo=UTC)
# More with SOLARAPI_TEST_FEED_ROUNDS=N (e.g. 20, after a change to the feed's read).
ROUNDS = int(os.environ.get("SOLARAPI_TEST_FEED_ROUNDS", "6"))
# How long the final drain may wait for a transaction of another process (PostgreSQL's
# horizon is the whole cluster's) to end before the test gives up.
DRAIN_DEADLINE_S = 120.0

Copy = dict[tuple[str, str], tuple[float, float | None]]


def _series(rng: random.Random, count: int) -> list[dict[str, Any]]:
    first = rng.randrange(0, 96 - count)
    value = float(rng.randrange(1, 1000))
    power = None if rng.random() < 0.3 else float(rng.randrange(0, 5000))
    return [
        {
            "timestamp": iso(JUNE + timedelta(minutes=15 * (first + i))),
            "energy_wh": value + i,
            "power_w": power,
        }
        for i in range(count)
    ]


async def _page(client: httpx.AsyncClient, token: str | None, limit: int) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": limit}
    if token is not None:
        params["cursor"] = token
    response = await client.get("/api/v1/readings/changes", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _stored(maker: async_sessionmaker[AsyncSession], system_ids: list[str]) -> Copy:
    async with maker() as session:
        rows = await session.execute(
            select(Reading.system_id, Reading.start_s, Reading.energy_wh, Reading.power_w).where(
                Reading.system_id.in_(system_ids)
            )
        )
    return {
        (system_id, iso(datetime.fromtimestamp(start_s, UTC))): (energy, power)
        for system_id, start_s, energy, power in rows
    }


async def _held_open_write(
    maker: async_sessionmaker[AsyncSession],
    system_id: str,
    rng: random.Random,
    written: asyncio.Event,
    page_read: asyncio.Event,
) -> None:
    """Write readings in a transaction that stays open until the reader has read a page
    after the write: the case a plain sequence number gets wrong."""
    items = _series(rng, rng.randrange(1, 8))
    starts = np.array(
        [int(datetime.fromisoformat(item["timestamp"]).timestamp()) for item in items],
        dtype=np.int64,
    )
    energy = np.array([item["energy_wh"] for item in items])
    power = np.array([np.nan if item["power_w"] is None else item["power_w"] for item in items])
    async with maker() as session, session.begin():
        system = await systems.get(session, system_id)
        assert system is not None
        await store_series(session, system, starts, energy, power)
        written.set()
        await page_read.wait()


async def _round(app: FastAPI, tenant: Tenant, seed: int) -> None:
    rng = random.Random(seed)
    maker: async_sessionmaker[AsyncSession] = app.state.sessionmaker
    postgres = app.state.settings.is_postgres
    async with client_for(app, tenant.live) as client:
        system_ids = [(await create_system(client))["id"] for _ in range(3)]
        # The held-open transactions write to a system of their own, so that the other
        # writers never wait for their lock (on PostgreSQL) and commit meanwhile.
        held_system = (await create_system(client))["id"]
        copy: Copy = {}
        token: str | None = None
        writers_done = asyncio.Event()

        async def writer(number: int) -> None:
            writer_rng = random.Random(seed * 100 + number)
            for _ in range(6):
                system_id = writer_rng.choice(system_ids)
                items = _series(writer_rng, writer_rng.randrange(1, 20))
                response = await upload(client, system_id, items)
                assert response.status_code == 200, response.text
                progress.set()
                committed.set()

        async def held_writer() -> None:
            for _ in range(2):
                written, page_read = asyncio.Event(), asyncio.Event()
                held_pages.append(page_read)
                task = asyncio.create_task(
                    _held_open_write(maker, held_system, rng, written, page_read)
                )
                await written.wait()
                if postgres and not writers_finished.is_set():
                    # Let another upload commit after this write, so the reader's next page
                    # holds a change newer than this open one. (SQLite: the open transaction
                    # holds the single write lock; the other writers wait for it.)
                    committed.clear()
                    await asyncio.wait(
                        [
                            asyncio.create_task(committed.wait()),
                            asyncio.create_task(writers_finished.wait()),
                        ],
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                progress.set()
                await task

        held_pages: list[asyncio.Event] = []

        # Set by the writers after each write: the reader reads one page per wake-up
        # (bounded, so the key's rate limit is never reached).
        progress = asyncio.Event()
        committed = asyncio.Event()
        writers_finished = asyncio.Event()

        async def reader() -> None:
            nonlocal token
            while not writers_done.is_set():
                await progress.wait()
                progress.clear()
                body = await _page(client, token, rng.choice([1, 3, 7, 50]))
                for event in held_pages:
                    event.set()
                for row in body["data"]:
                    copy[row["system_id"], row["timestamp"]] = (row["energy_wh"], row["power_w"])
                token = body["next_cursor"]

        reading = asyncio.create_task(reader())

        async def writers() -> None:
            await asyncio.gather(writer(1), writer(2), writer(3))
            writers_finished.set()

        await asyncio.gather(writers(), held_writer())
        writers_done.set()
        progress.set()
        await reading
        # Drain: follow the cursor until has_more is false.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_DEADLINE_S
        pause = 0.05
        while True:
            body = await _page(client, token, 10)
            copy.update(as_copy(body["data"]))
            token = body["next_cursor"]
            if not body["has_more"]:
                break
            assert loop.time() < deadline, "the feed held changes back for too long"
            if not body["data"]:
                # Committed changes wait behind a transaction of another connection (on
                # PostgreSQL any of the server's): poll, backing off so that the key's rate
                # limit is never reached.
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
    assert copy == await _stored(maker, [*system_ids, held_system])


async def test_copy_equals_database_after_concurrent_uploads(
    app: FastAPI, enterprise: Tenant
) -> None:
    for seed in range(ROUNDS):
        # A tenant per round: its own key, so its own rate-limit windows.
        tenant = enterprise if seed == 0 else await make_tenant(app, Plan.ENTERPRISE)
        await _round(app, tenant, seed)


async def test_change_of_an_open_transaction_is_not_skipped(
    app: FastAPI, enterprise: Tenant
) -> None:
    """A transaction takes its place in the log, then another upload commits after it and is
    read; the first commits only then. A cursor by sequence alone would be past it."""
    maker: async_sessionmaker[AsyncSession] = app.state.sessionmaker
    postgres = app.state.settings.is_postgres
    async with client_for(app, enterprise.live) as client:
        slow, fast = [(await create_system(client))["id"] for _ in range(2)]
        token = (await _page(client, None, 100))["next_cursor"]
        written, page_read = asyncio.Event(), asyncio.Event()
        held = asyncio.create_task(
            _held_open_write(maker, slow, random.Random(1), written, page_read)
        )
        await written.wait()
        if postgres:  # SQLite's second writer would wait for the first to commit
            assert (await upload(client, fast, _series(random.Random(2), 4))).status_code == 200
        body = await _page(client, token, 100)
        assert all(row["system_id"] != slow for row in body["data"])
        held_back = body["has_more"]
        token = body["next_cursor"]
        page_read.set()
        await held
        rows: list[dict[str, Any]] = list(body["data"])
        pause = 0.05
        while True:
            body = await _page(client, token, 100)
            rows += body["data"]
            token = body["next_cursor"]
            if not body["has_more"]:
                break
            if not body["data"]:  # held back behind another server transaction: poll
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
    assert {row["system_id"] for row in rows} == ({slow, fast} if postgres else {slow})
    assert as_copy(rows) == await _stored(maker, [slow, fast])
    if postgres:
        # The committed upload was held back behind the open transaction.
        assert held_back is True
