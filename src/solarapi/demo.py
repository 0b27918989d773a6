"""Demo accounts, one per plan, each with a live and a test key (idempotent).

Demo keys are derived from the server secret, so re-running `solarapi demo` prints the same
working keys without ever storing a key: only their HMAC is in the database.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts import repository as account_repo
from solarapi.accounts.service import create_account
from solarapi.auth import repository as key_repo
from solarapi.auth.keys import BASE62, checksum, display_form, hash_key
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Environment, Plan
from solarapi.models import ApiKey
from solarapi.prices.demo import PRICE_ORIGIN
from solarapi.prices.demo import add_demo_data as prices_demo
from solarapi.readings.demo import DEMO_SYSTEMS
from solarapi.readings.demo import add_demo_data as systems_demo

DEMO_PASSWORD = "solar-demo-password"  # noqa: S105 - printed on purpose: demo accounts only


@dataclass(frozen=True, slots=True)
class DemoAccount:
    account_id: str
    name: str
    email: str
    plan: Plan
    keys: dict[Environment, str]


DemoDataHook = Callable[[AsyncSession, str, Plan, datetime], Awaitable[None]]


def _data_hooks() -> list[DemoDataHook]:
    """Each area's demo data, in dependency order (systems and readings before prices)."""

    return [systems_demo, prices_demo]


@dataclass(frozen=True, slots=True)
class DemoData:
    """What the demo data is and where it comes from, for `solarapi demo` to print."""

    systems: list[str]
    readings: str
    price_zones: list[str]
    price_source: str
    price_origin: str

    def to_json(self) -> dict[str, object]:
        return {
            "systems": self.systems,
            "readings": self.readings,
            "prices": {
                "zones": self.price_zones,
                "source": self.price_source,
                "origin": self.price_origin,
            },
        }


def demo_data_summary() -> DemoData:

    return DemoData(
        systems=[spec.name for spec in DEMO_SYSTEMS],
        readings=(
            "15-minute readings computed by the sandbox's physical model, from the local "
            "midnight of each system's installed_on (a year before the first demo run) up to "
            "the run, with three deliberate gaps"
        ),
        price_zones=sorted({spec.market_zone for spec in DEMO_SYSTEMS if spec.market_zone}),
        price_source="simulated",
        price_origin=(
            f"a year up to the end of tomorrow, {PRICE_ORIGIN}; an import or fetch of real "
            "ENTSO-E prices replaces them"
        ),
    )


def demo_key(secret: bytes, email: str, environment: Environment) -> str:
    digest = hmac.new(
        secret, f"demo-key:{email}:{environment.value}".encode(), hashlib.sha256
    ).digest()
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(32):
        number, rest = divmod(number, 62)
        chars.append(BASE62[rest])
    random_part = "".join(chars)
    return f"pk_{environment.value}_{random_part}{checksum(random_part)}"


async def ensure_demo_accounts(
    session: AsyncSession, secret: bytes, now: datetime, with_data: bool = True
) -> list[DemoAccount]:
    result: list[DemoAccount] = []
    for plan in Plan:
        email = f"demo-{plan.value}@example.com"
        name = f"Demo {plan.value.capitalize()}"
        user = await account_repo.find_user_by_email(session, email)
        if user is None:
            created = await create_account(
                session, name=name, email=email, password=DEMO_PASSWORD, plan=plan, now=now
            )
            account_id = created.account.id
        else:
            account_id = user.account_id
            account = await account_repo.get_account(session, account_id)
            assert account is not None
            account.plan = plan
        keys: dict[Environment, str] = {}
        for environment in Environment:
            key = demo_key(secret, email, environment)
            key_hash = hash_key(key, secret)
            record = await key_repo.find_key_by_hash(session, key_hash)
            if record is None:
                await key_repo.add_key(
                    session,
                    ApiKey(
                        id=new_id("key"),
                        account_id=account_id,
                        name=f"Demo {environment.value} key",
                        environment=environment,
                        key_hash=key_hash,
                        display=display_form(key),
                        created_at=now,
                    ),
                )
            elif record.revoked_at is not None:
                stored = await key_repo.get_key(session, record.key_id)
                assert stored is not None
                stored.revoked_at = None
            keys[environment] = key
        if with_data:
            for hook in _data_hooks():
                await hook(session, account_id, plan, now)
        result.append(DemoAccount(account_id, name, email, plan, keys))
    await session.flush()
    return result
