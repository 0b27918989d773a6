"""The client's models keep every field the server sends: each answer's JSON, key by key and
nested, against the typed object decoded from it (a field the models lack is silently dropped
by the decoder, which ignores unknown keys so that an older client keeps working)."""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from solarapi_client import Client
from tests.client.conftest import Served
from tests.support import Tenant


def _json_key(field: dataclasses.Field[Any]) -> str:
    name = field.name
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name


def dropped(decoded: Any, raw: Any, where: str = "") -> list[str]:
    """The JSON keys under `raw` that `decoded` has no field for (paths like `meta.totals.x`)."""
    if dataclasses.is_dataclass(decoded) and isinstance(raw, dict):
        fields = {_json_key(field): field for field in dataclasses.fields(decoded)}
        missing = [f"{where}{key}" for key in raw if key not in fields]
        for key, field in fields.items():
            if key in raw:
                missing += dropped(getattr(decoded, field.name), raw[key], f"{where}{key}.")
        return missing
    if isinstance(decoded, list) and isinstance(raw, list):
        return [m for d, r in zip(decoded, raw, strict=True) for m in dropped(d, r, where)]
    return []  # a value, or a free-form object (`evidence`, `model`): kept as the JSON is


@contextmanager
def capturing(served: Served, key: str) -> Iterator[tuple[Client, list[Any]]]:
    bodies: list[Any] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        if response.headers.get("content-type", "").startswith("application/json"):
            bodies.append(response.json())

    http = httpx.Client(timeout=60, event_hooks={"response": [keep]})
    with Client(api_key=key, base_url=served.base_url, http_client=http) as client:
        yield client, bodies


def test_no_answer_loses_a_field(served: Served, enterprise: Tenant) -> None:
    day = (datetime.now(UTC) - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = day, day + timedelta(days=1)
    with capturing(served, enterprise.test) as (sandbox, bodies):
        system = next(iter(sandbox.systems.list()))  # the sandbox's simulated systems
        zoned = next(s for s in sandbox.systems.list() if s.market_zone is not None)
        zone = zoned.market_zone
        assert zone is not None
        code: str = zone  # (a lambda does not keep the narrowing)
        calls: list[tuple[str, Any]] = [
            ("health", lambda: sandbox.health()),
            ("account", lambda: sandbox.account.get()),
            ("system", lambda: sandbox.systems.get(system.id)),
            ("summary", lambda: sandbox.systems.summary(system.id)),
            (
                "readings",
                lambda: sandbox.readings.get(system.id, interval="1h", start=start, end=end),
            ),
            ("performance", lambda: sandbox.systems.performance(system.id, start=start, end=end)),
            (
                "market prices",
                lambda: sandbox.market_prices.get(code, interval="1h", start=start, end=end),
            ),
            (
                "market value",
                lambda: sandbox.market_value.get(zoned.id, interval="1h", start=start, end=end),
            ),
            (
                "portfolio readings",
                lambda: sandbox.portfolio.readings(interval="1d", start=start, end=end),
            ),
            ("portfolio summary", lambda: sandbox.portfolio.summary()),
            (
                "portfolio market value",
                lambda: sandbox.portfolio.market_value(interval="1d", start=start, end=end),
            ),
            ("zones", lambda: sandbox.market_prices.zones()),
            ("irradiance", lambda: sandbox.irradiance.get(system.id, start=start, end=end)),
        ]
        for name, call in calls:
            bodies.clear()
            decoded = call()
            assert bodies, name
            raw = bodies[-1]
            if isinstance(decoded, list):  # a list answer: {"data": [...]}
                raw = raw["data"]
                assert len(decoded) == len(raw) > 0, name
            elif name.startswith("portfolio"):  # the pages merged: pagination is consumed
                assert raw.pop("pagination")["has_more"] is False, name
            assert dropped(decoded, raw) == [], name
