"""Webhook verification on the server's real deliveries, DataFrames of real series, and the
async client: the same surface as the sync one, used against the same server."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from datetime import UTC, datetime

import pandas as pd
import pytest

from solarapi_client import AsyncClient, Client, WebhookVerificationError, verify_webhook
from solarapi_client.models import Webhook
from tests.client.conftest import Served
from tests.support import Tenant
from tests.webhooks.receiver import Received, Receiver, running_receiver

ROOF = {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"}


def _delivery(receiver: Receiver, count: int, seconds: float = 60) -> Received:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with receiver.lock:
            if len(receiver.received) >= count:
                return receiver.received[count - 1]
        time.sleep(0.1)
    raise AssertionError(f"delivery {count} did not arrive within {seconds} s")


def test_verify_webhook_on_real_deliveries(client: Client) -> None:
    with running_receiver() as receiver:
        hook: Webhook = client.webhooks.create(url=receiver.url, events=["system.created"])
        assert hook.secret is not None
        system = client.systems.create(name="Signed", capacity_kwp=2.0, location=ROOF)
        delivered = _delivery(receiver, 1)

        event = verify_webhook(delivered.body, delivered.headers, hook.secret)
        assert event.type == "system.created"
        assert event.data["id"] == system.id
        listed = next(iter(client.events.list(type="system.created")))
        assert event == listed

        with pytest.raises(WebhookVerificationError, match="no signature"):
            verify_webhook(delivered.body + b" ", delivered.headers, hook.secret)
        other = client.webhooks.create(url=receiver.url, events=["system.deleted"])
        assert other.secret is not None
        with pytest.raises(WebhookVerificationError, match="no signature"):
            verify_webhook(delivered.body, delivered.headers, other.secret)
        later = int(delivered.headers["webhook-timestamp"]) + 600
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify_webhook(delivered.body, delivered.headers, hook.secret, now=later)
        without_id = {k: v for k, v in delivered.headers.items() if k != "webhook-id"}
        with pytest.raises(WebhookVerificationError, match="webhook-id"):
            verify_webhook(delivered.body, without_id, hook.secret)

        # After a rotation the old and the new secret both verify, while they overlap.
        rotated = client.webhooks.rotate_secret(hook.id)
        assert rotated.secret is not None
        client.systems.create(name="Signed twice", capacity_kwp=2.0, location=ROOF)
        second = _delivery(receiver, 2)
        assert len(second.headers["webhook-signature"].split()) == 2
        for secret in (rotated.secret, hook.secret):
            assert verify_webhook(second.body, second.headers, secret).data["name"] == (
                "Signed twice"
            )
        assert json.loads(second.body)["type"] == "system.created"


def test_series_as_dataframes_with_a_tz_aware_index(sandbox: Client) -> None:
    system = next(s for s in sandbox.systems.list() if s.location.timezone == "Europe/Amsterdam")
    # The week of the autumn DST change in Amsterdam: one local day is 25 hours long.
    series = sandbox.readings.get(
        system.id, start="2025-10-23T22:00:00Z", end="2025-10-29T23:00:00Z", interval="1d"
    )
    frame = series.to_dataframe(tz=series.meta.timezone)
    assert len(frame) == len(series.data) == 6
    assert str(frame.index.tz) == "Europe/Amsterdam"
    assert all(t.hour == 0 for t in frame.index)  # local midnights
    assert frame.index[0] == pd.Timestamp(series.data[0].start)
    assert list(frame["energy_wh"]) == [b.energy_wh for b in series.data]
    assert list(frame["expected_samples"]) == [96, 96, 100, 96, 96, 96]

    utc = series.to_dataframe()
    assert str(utc.index.tz) == "UTC"
    assert utc.index[0] == pd.Timestamp("2025-10-23T22:00:00Z")

    prices = sandbox.market_prices.get(
        "NL", start="2025-10-26T00:00:00Z", end="2025-10-26T03:00:00Z", interval="1h"
    ).to_dataframe()
    assert list(prices.columns) == ["end", "price_eur_per_mwh"]
    assert len(prices) == 3


def test_missing_values_are_nan_not_zero(client: Client) -> None:
    system = client.systems.create(name="Gappy", capacity_kwp=2.0, location=ROOF)
    client.readings.upload(system.id, [{"timestamp": "2025-05-01T10:00:00Z", "energy_wh": 7.0}])
    series = client.readings.get(
        system.id, start="2025-05-01T10:00:00Z", end="2025-05-01T12:00:00Z", interval="1h"
    )
    assert [b.energy_wh for b in series.data] == [7.0, None]
    frame = series.to_dataframe()
    assert frame["energy_wh"].iloc[0] == 7.0
    assert pd.isna(frame["energy_wh"].iloc[1])


def _surface(client: type) -> dict[str, dict[str, inspect.Signature]]:
    resources = {
        name: type(value)
        for name, value in vars(client(api_key="pk_test_" + "x" * 38, base_url="http://x")).items()
        if not name.startswith("_")
    }
    return {
        name: {
            method: inspect.signature(getattr(cls, method))
            for method in dir(cls)
            if not method.startswith("_")
        }
        for name, cls in resources.items()
    }


def test_the_async_client_has_the_same_surface() -> None:
    sync, async_ = _surface(Client), _surface(AsyncClient)
    assert set(sync) == set(async_)
    assert len(sync) == 13  # alerts and ingest_tokens joined the eleven
    for resource, methods in sync.items():
        assert set(methods) == set(async_[resource]), resource
        for name, signature in methods.items():
            other = async_[resource][name]
            assert list(signature.parameters) == list(other.parameters), (resource, name)
            sync_returns = str(signature.return_annotation).replace("SyncPager", "Pager")
            async_returns = (
                str(other.return_annotation)
                .replace("AsyncPager", "Pager")
                .replace("AsyncIterator", "Iterator")
                .replace("AsyncChangeFeed", "ChangeFeed")
            )
            assert sync_returns == async_returns, (resource, name)


async def test_async_client_against_the_server(served: Served, enterprise: Tenant) -> None:
    async with AsyncClient(api_key=enterprise.live, base_url=served.base_url) as api:
        created = await asyncio.gather(
            *(
                api.systems.create(name=f"Async {i}", capacity_kwp=1.0, location=ROOF)
                for i in range(5)
            )
        )
        listed = [s async for s in api.systems.list(page_size=2)]
        assert sorted(s.id for s in listed) == sorted(s.id for s in created)
        pages = [page async for page in api.systems.list(page_size=2).pages()]
        assert [len(p.data) for p in pages] == [2, 2, 1]
        assert pages[0].pagination.total == 5
        await api.readings.upload(
            created[0].id,
            [{"timestamp": datetime(2025, 5, 1, 10, tzinfo=UTC), "energy_wh": 5.0}],
        )
        series = await api.readings.get(
            created[0].id, start="2025-05-01T10:00:00Z", end="2025-05-01T11:00:00Z"
        )
        assert [b.energy_wh for b in series.data] == [5.0]
        fleet = await api.portfolio.readings(
            start="2025-05-01T10:00:00Z", end="2025-05-01T11:00:00Z", interval="1h", page_size=2
        )
        assert sorted(s.system_id for s in fleet.data) == sorted(s.id for s in created)
        assert fleet.meta.totals.energy_wh == 5.0
        assert fleet.meta.totals.systems_with_data == 1
        feed = api.readings.changes()
        changes = [change async for change in feed]
        assert [(c.system_id, c.energy_wh) for c in changes] == [(created[0].id, 5.0)]
        assert feed.cursor is not None
        report = await api.reports.create(
            type="production", format="csv", system_ids=[created[0].id],
            start="2025-05-01T00:00:00Z", end="2025-05-02T00:00:00Z", interval="1d",
        )  # fmt: skip
        done = await api.reports.wait(report.id, timeout=120, poll_interval=0.2)
        assert done.status == "completed", done.error
        assert (await api.reports.download(report.id)).startswith(b"system_id")


def test_a_range_over_10000_buckets_comes_in_pieces_that_add_up(sandbox: Client) -> None:
    system = next(s for s in sandbox.systems.list() if s.location.timezone == "Europe/Amsterdam")
    # 110 local days of quarter-hours across the autumn DST change (one 25-hour day):
    # 10,564 buckets, more than one request may ask for.
    start, end = "2025-08-31T22:00:00Z", "2025-12-19T23:00:00Z"
    pieces = list(sandbox.readings.get_range(system.id, start=start, end=end, interval="15m"))
    assert len(pieces) == 2
    assert all(len(piece.data) <= 10_000 for piece in pieces)
    # Contiguous on bucket boundaries: each piece starts where the one before ended.
    assert pieces[0].meta.from_ == datetime.fromisoformat(start)
    assert pieces[0].meta.to == pieces[1].meta.from_ == pieces[1].data[0].start
    assert pieces[-1].meta.to == datetime.fromisoformat(end)
    starts = [bucket.start for piece in pieces for bucket in piece.data]
    assert len(starts) == len(set(starts)) == 110 * 96 + 4
    # The pieces' totals add up to the same range asked for in days (one request).
    days = sandbox.readings.get(system.id, start=start, end=end, interval="1d")
    assert len(days.data) == 110
    assert sum(p.meta.totals.expected_samples for p in pieces) == days.meta.totals.expected_samples
    assert sum(p.meta.totals.samples for p in pieces) == days.meta.totals.samples
    energy = sum(p.meta.totals.energy_wh or 0.0 for p in pieces)
    assert days.meta.totals.energy_wh is not None
    assert abs(energy - days.meta.totals.energy_wh) < 0.01
