"""Demo data: two live metered systems with a year of readings and visible gaps, idempotent;
readings start at the systems' installed_on and demo prices cover their zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from fastapi import FastAPI
from sqlalchemy import func, select

from solarapi.kit.grid import local_midnight
from solarapi.kit.plans import Plan
from solarapi.models.readings import Reading
from solarapi.models.systems import System
from solarapi.prices.demo import add_demo_data as add_demo_prices
from solarapi.readings.demo import GAPS, add_demo_data
from tests.support import Tenant, client_for


async def test_demo_data_is_a_year_with_gaps_and_idempotent(
    app: FastAPI, enterprise: Tenant
) -> None:
    now = datetime.now(UTC)
    for _ in range(2):
        async with app.state.sessionmaker() as session, session.begin():
            await add_demo_data(session, enterprise.account_id, Plan.ENTERPRISE, now)
            await add_demo_prices(session, enterprise.account_id, Plan.ENTERPRISE, now)
    async with app.state.sessionmaker() as session:
        systems = (
            await session.scalars(select(System).where(System.account_id == enterprise.account_id))
        ).all()
        counts = [
            await session.scalar(
                select(func.count()).select_from(Reading).where(Reading.system_id == system.id)
            )
            for system in systems
        ]
    assert sorted(system.name for system in systems) == ["Barn Freiburg", "Rooftop Haarlem"]
    assert {(s.environment, s.data_source) for s in systems} == {("live", "metered")}
    missing = sum(int(hours * 4) for _, hours in GAPS)  # every gap is whole quarter-hours
    last_end = int(now.timestamp()) // 900 * 900
    for system, count in zip(systems, counts, strict=True):
        # Installed a year before the run; its readings start at that day's local midnight.
        tz = ZoneInfo(system.timezone)
        assert system.installed_on == now.astimezone(tz).date() - timedelta(days=365)
        first = local_midnight(system.installed_on, tz)
        assert system.first_reading_at == datetime.fromtimestamp(first, UTC)
        assert count == (last_end - first) // 900 - missing
    haarlem = next(system for system in systems if system.name == "Rooftop Haarlem")
    gap_day = now - timedelta(days=200)
    async with client_for(app, enterprise.live) as client:
        year = (
            await client.get(
                f"/api/v1/systems/{haarlem.id}/readings",
                params={
                    "from": (now - timedelta(days=364)).strftime("%Y-%m-%dT00:00:00Z"),
                    "interval": "1M",
                },
            )
        ).json()
        around_gap = (
            await client.get(
                f"/api/v1/systems/{haarlem.id}/readings",
                params={
                    "from": gap_day.strftime("%Y-%m-%dT%H:00:00Z"),
                    "to": (gap_day + timedelta(hours=12)).strftime("%Y-%m-%dT%H:00:00Z"),
                },
            )
        ).json()
        # Demo prices cover every demo system's zone over all its readings.
        values = {
            system.name: (
                await client.get(
                    f"/api/v1/systems/{system.id}/market-value",
                    params={
                        "from": system.first_reading_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "to": datetime.fromtimestamp(last_end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "interval": "1M",
                    },
                )
            ).json()
            for system in systems
            if system.first_reading_at is not None
        }
    # Plausible for 8.4 kWp in the Netherlands: roughly 600 to 1,200 kWh per kWp and year.
    assert 8.4 * 600_000 < year["meta"]["totals"]["energy_wh"] < 8.4 * 1_200_000
    assert any(bucket["energy_wh"] is None for bucket in around_gap["data"])
    assert sorted(values) == ["Barn Freiburg", "Rooftop Haarlem"]
    for body in values.values():
        assert body["meta"]["source"] == "simulated"  # truthfully: not market data
        months = [bucket for bucket in body["data"] if bucket["energy_wh"]]
        assert len(months) >= 12
        assert all(bucket["value_eur"] is not None for bucket in months)
        assert all(bucket["price_eur_per_mwh"] is not None for bucket in body["data"])


async def test_a_demo_run_later_adds_the_quarter_hours_since_the_last_reading(
    app: FastAPI, enterprise: Tenant
) -> None:
    first_run = datetime.now(UTC) - timedelta(days=2, hours=5, minutes=7)
    later = first_run + timedelta(days=2, hours=5, minutes=7)
    async with app.state.sessionmaker() as session, session.begin():
        await add_demo_data(session, enterprise.account_id, Plan.ENTERPRISE, first_run)

    async def readings() -> dict[str, dict[int, float]]:
        async with app.state.sessionmaker() as session:
            systems = (
                await session.scalars(
                    select(System).where(System.account_id == enterprise.account_id)
                )
            ).all()
            stored: dict[str, dict[int, float]] = {}
            for system in systems:
                rows = await session.execute(
                    select(Reading.start_s, Reading.energy_wh).where(Reading.system_id == system.id)
                )
                stored[system.id] = {int(start): float(energy) for start, energy in rows.all()}
            return stored

    before = await readings()
    async with app.state.sessionmaker() as session, session.begin():
        await add_demo_data(session, enterprise.account_id, Plan.ENTERPRISE, later)
    after = await readings()
    old_end = int(first_run.timestamp()) // 900 * 900
    new_end = int(later.timestamp()) // 900 * 900
    assert before.keys() == after.keys()
    assert len(after) == 2
    for system_id, stored in after.items():
        # Everything stored before is kept as it was, gaps included; the quarter-hours that
        # ended since are added, every one of them, with the model's energy.
        assert {start: stored[start] for start in before[system_id]} == before[system_id]
        added = sorted(set(stored) - set(before[system_id]))
        assert added == list(range(old_end, new_end, 900))
        assert sum(stored[start] for start in added) > 0  # two days hold daylight
    async with app.state.sessionmaker() as session:
        systems = (
            await session.scalars(select(System).where(System.account_id == enterprise.account_id))
        ).all()
    assert {system.last_reading_at for system in systems} == {
        datetime.fromtimestamp(new_end - 900, UTC)
    }
    # A third run at the same time adds nothing.
    async with app.state.sessionmaker() as session, session.begin():
        await add_demo_data(session, enterprise.account_id, Plan.ENTERPRISE, later)
    assert await readings() == after
