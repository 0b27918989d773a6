"""Plan scope: what the caller's plan lets it call (`auth.scopes` holds the table)."""

from __future__ import annotations

from solarapi.auth.principal import Principal
from solarapi.auth.scopes import forbidden_message, plan_allows
from solarapi.errors import Forbidden
from solarapi.kit.plans import PLAN_LIMITS


def has_api(principal: Principal) -> bool:
    """False for a plan without the API, whose key is then treated like no key."""
    return PLAN_LIMITS[principal.plan].api


def refusal(principal: Principal, method: str, relative: str) -> Forbidden | None:
    """The 403 of a route (its template below the API prefix) the plan does not include."""
    if plan_allows(principal.plan, method, relative):
        return None
    return Forbidden(forbidden_message(principal.plan, method, relative))
