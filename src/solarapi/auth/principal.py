"""The authenticated caller, put on the request by the gateway: an API key's `Principal`,
or on `POST /ingest/readings` a data logger's `IngestCaller`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from solarapi.errors import Unauthorized
from solarapi.kit.plans import Environment, Plan


@dataclass(frozen=True, slots=True)
class Caller:
    """Whoever acts on one environment of an account: the one caller type the services
    take (tenancy is account + environment), so the API, the dashboard, the CLI and the
    report jobs run the same rules. An API key's caller is its `Principal`."""

    account_id: str
    environment: Environment


@dataclass(frozen=True, slots=True)
class Principal(Caller):
    """The caller of an API request: its key's account and environment, with the key and
    the plan that the gateway's checks and the key endpoints need."""

    account_name: str
    plan: Plan
    key_id: str
    key_name: str
    key_display: str
    key_created_at: datetime
    key_last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class IngestCaller:
    """The data logger behind a request: one token of one system."""

    token_id: str
    token_name: str
    display: str
    system_id: str
    account_id: str
    environment: str


# Where the gateway leaves the authenticated logger of a `POST /ingest/readings`.
INGEST_CALLER = "ingest_caller"

# Where the gateway leaves the caller's counts in its key's windows (this request included):
# beside the Principal, not in a copy of it (a frozen dataclass of 11 fields built per
# request: ~19,000 instructions; bench/fleet/README.md). Read by `GET /account`.
USAGE = "solarapi.usage"


def request_usage(request: Request) -> tuple[int, int]:
    """The caller's requests in its current minute and day (0, 0 when not counted)."""
    usage: tuple[int, int] = request.scope.get("state", {}).get(USAGE, (0, 0))
    return usage


async def get_principal(request: Request) -> Principal:
    # async although it awaits nothing: FastAPI runs a plain `def` dependency in its thread
    # pool, a hand-over to another thread and back on every API request.
    principal = request.scope.get("state", {}).get("principal")
    if not isinstance(principal, Principal):
        # Reaching a protected route without the middleware having authenticated is a bug
        # in wiring, never a client error; answer as if unauthenticated.
        raise Unauthorized("missing Authorization header")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
