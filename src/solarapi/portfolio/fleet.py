"""Which systems a portfolio request covers: the filters, their checks, and the page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import NotFound, ValidationFailed
from solarapi.kit.pagination import PageParams, parse_page
from solarapi.kit.text import excerpt
from solarapi.kit.zones import ZONES
from solarapi.models.systems import SYSTEM_STATUSES, SystemRecord
from solarapi.systems import repository as systems
from solarapi.systems.repository import FleetMember

MAX_SYSTEM_IDS = 1_000
DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
MAX_BUCKETS = 100_000  # systems × buckets of one page

S = TypeVar("S", SystemRecord, FleetMember)


@dataclass(frozen=True, slots=True)
class FleetQuery:
    status: str | None
    market_zone: str | None
    system_ids: tuple[str, ...] | None
    page: PageParams


@dataclass(frozen=True, slots=True)
class Fleet(Generic[S]):
    """Every matching system (ordered by `created_at`, `id`) and the page's part of them:
    as records, or as `FleetMember`s where a fleet-wide read needs no more."""

    systems: list[S]
    page: PageParams
    missing: tuple[str, ...] = ()  # ids of `system_ids` that are not the caller's

    def check_found(self) -> None:
        """404 naming the first id of `system_ids` that is not the caller's (unknown, another
        account's, the other environment's). Called after the request's 400 checks, the
        page size among them, which need the found systems' calendars (400 before 404)."""
        if self.missing:
            raise NotFound(f"No system with id '{excerpt(self.missing[0])}'")

    @property
    def on_page(self) -> list[S]:
        return self.systems[self.page.offset : self.page.offset + self.page.limit]


def parse_fleet(
    *,
    status: str | None,
    market_zone: str | None,
    system_ids: str | None,
    page: str | None,
    limit: str | None,
) -> FleetQuery:
    """The filters and page of a portfolio request; ValidationFailed (400) for any bad one."""
    if status is not None and status not in SYSTEM_STATUSES:
        raise ValidationFailed(
            f"status must be one of {', '.join(SYSTEM_STATUSES)}; got '{excerpt(status)}'"
        )
    if market_zone is not None and market_zone not in ZONES:
        raise ValidationFailed(
            f"market_zone: unknown zone '{excerpt(market_zone)}'; see GET /api/v1/market-prices/zones"
        )
    ids: tuple[str, ...] | None = None
    if system_ids is not None:
        parts = system_ids.split(",")
        if len(parts) > MAX_SYSTEM_IDS:
            raise ValidationFailed(
                f"system_ids holds {len(parts):,} ids; at most {MAX_SYSTEM_IDS:,} are allowed"
            )
        seen: set[str] = set()
        for i, part in enumerate(parts):
            if not part:
                raise ValidationFailed(f"system_ids[{i}]: is empty (ids are comma-separated)")
            if part in seen:
                raise ValidationFailed(f"system_ids[{i}]: '{excerpt(part)}' is given twice")
            seen.add(part)
        ids = tuple(parts)
    params = parse_page(page, limit, default_limit=DEFAULT_LIMIT, max_limit=MAX_LIMIT)
    return FleetQuery(status, market_zone, ids, params)


async def select_fleet(
    session: AsyncSession, principal: Principal, query: FleetQuery
) -> Fleet[SystemRecord]:
    """The caller's matching systems, read in one query, and the ids of `system_ids` that
    are not the caller's (`Fleet.check_found`)."""
    found = await systems.matching_records(
        session,
        account_id=principal.account_id,
        environment=principal.environment,
        status=None if query.system_ids else query.status,
        market_zone=None if query.system_ids else query.market_zone,
        system_ids=query.system_ids,
    )
    return _matching(found, query)


async def select_members(
    session: AsyncSession, principal: Principal, query: FleetQuery
) -> Fleet[FleetMember]:
    """`select_fleet` as `FleetMember`s: the environment's systems read in one query of a
    few columns, filtered here."""
    found = await systems.members(
        session, account_id=principal.account_id, environment=principal.environment
    )
    if query.system_ids is not None:
        wanted = set(query.system_ids)
        found = [member for member in found if member.id in wanted]
    return _matching(found, query)


def _matching(found: list[S], query: FleetQuery) -> Fleet[S]:
    """The systems of `found` that match the filters, and the ids of `system_ids` not among
    them (unknown, another account's, the other environment's), in the order given."""
    missing: tuple[str, ...] = ()
    if query.system_ids is not None:
        known = {system.id for system in found}
        missing = tuple(system_id for system_id in query.system_ids if system_id not in known)
    matching = [
        system
        for system in found
        if query.status in (None, system.status) and query.market_zone in (None, system.market_zone)
    ]
    return Fleet(matching, query.page, missing)


def check_page_size(bucket_counts: Sequence[int], limit: int, what: str) -> None:
    """400 when a page's systems × buckets exceed MAX_BUCKETS, naming the largest `limit`
    that fits (with this range and interval)."""
    total = sum(bucket_counts)
    if total <= MAX_BUCKETS:
        return
    largest = max(1, MAX_BUCKETS // max(bucket_counts))
    raise ValidationFailed(
        f"this page holds {total:,} {what} buckets ({len(bucket_counts):,} systems), more than "
        f"the {MAX_BUCKETS:,} allowed per request; the largest limit that fits this range and "
        f"interval is {largest:,} (or choose a shorter range or a coarser interval); "
        f"limit is {limit:,}"
    )
