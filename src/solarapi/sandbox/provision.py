"""Creating an account's simulated sandbox systems on its first sandbox request.

Called by `auth.service.authenticate` while `accounts.sandbox_provisioned_at` is null, in the
gateway's own transaction (committed before the endpoint runs, so the first request already
sees the systems). Idempotent and race-safe: only the transaction whose conditional UPDATE
claimed the account creates systems.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.plans import Environment
from solarapi.models.systems import DataSource
from solarapi.sandbox.repository import claim_provisioning
from solarapi.systems.service import SystemSpec, add_system, new_system

# Simulated history starts this many whole years before the year of provisioning, so a new
# sandbox already has complete past years to aggregate, declare and report on.
HISTORY_YEARS = 2


# Chosen to exercise time zones, hemispheres and clipping (contract section 9).
SANDBOX_SYSTEMS: tuple[SystemSpec, ...] = (
    # A typical Dutch terraced-house roof: south, 35°, inverter a little under the array.
    SystemSpec(
        name="Residential roof Utrecht (sandbox)",
        latitude=52.0907,
        longitude=5.1214,
        timezone="Europe/Amsterdam",
        country="NL",
        capacity_kwp=8.0,
        inverter_capacity_kw=7.0,
        tilt_deg=35.0,
        azimuth_deg=180.0,
        market_zone="NL",
    ),
    # A ground-mounted park with a DC/AC ratio of 1.25: it clips at 600 kW on bright days.
    SystemSpec(
        name="Solar park Brandenburg (sandbox)",
        latitude=52.2500,
        longitude=13.6000,
        timezone="Europe/Berlin",
        country="DE",
        capacity_kwp=750.0,
        inverter_capacity_kw=600.0,
        tilt_deg=20.0,
        azimuth_deg=180.0,
        market_zone="DE-LU",
    ),
    # The common Australian 6.6 kWp / 5 kW install, facing north (the equator), no market zone.
    SystemSpec(
        name="Residential roof Sydney (sandbox)",
        latitude=-33.8688,
        longitude=151.2093,
        timezone="Australia/Sydney",
        country="AU",
        capacity_kwp=6.6,
        inverter_capacity_kw=5.0,
        tilt_deg=20.0,
        azimuth_deg=0.0,
        market_zone=None,
    ),
)


async def ensure_sandbox(session: AsyncSession, account_id: str, now: datetime) -> None:
    """Idempotent and safe under concurrent first requests: provisions at most once."""
    if not await claim_provisioning(session, account_id, now):
        return
    installed_on = date(now.year - HISTORY_YEARS, 1, 1)
    for order, spec in enumerate(SANDBOX_SYSTEMS):
        # A microsecond apart, so the list endpoint (created_at, id) shows them in this order.
        created_at = now + timedelta(microseconds=order)
        system = new_system(
            replace(spec, installed_on=installed_on),
            account_id=account_id,
            environment=Environment.TEST,
            data_source=DataSource.SIMULATED,
            created_at=created_at,
        )
        await add_system(session, system)
