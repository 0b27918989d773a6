"""Which plan may call what: the single scope table of the API.

Pro may call the read-only endpoints listed in `PRO_READABLE`; everything else under the API
(writes, declarations, reports, webhooks, events) needs Enterprise. Starter has no API.
The plan is read from the account on every request, so plan changes apply at once.
"""

from __future__ import annotations

import functools

from solarapi.kit.plans import PLAN_LIMITS, Plan

API_PREFIX = "/api/v1"

# Route templates (relative to /api/v1) that Pro keys may call with GET/HEAD.
PRO_READABLE: frozenset[str] = frozenset(
    {
        "/account",
        "/systems",
        "/systems/{system_id}",
        "/systems/{system_id}/readings",
        "/systems/{system_id}/summary",
        "/systems/{system_id}/market-value",
        "/systems/{system_id}/performance",
        "/systems/{system_id}/irradiance",
        "/market-prices",
        "/market-prices/zones",
        "/readings/changes",
        "/portfolio/readings",
        "/portfolio/summary",
        "/portfolio/market-value",
        "/alerts",
        "/alerts/{alert_id}",
    }
)

# Routes that need no key at all.
PUBLIC: frozenset[str] = frozenset(
    {"/health", "/health/live", "/openapi.json", "/docs", "/docs/oauth2-redirect"}
)

_GROUP_MESSAGES: dict[str, str] = {
    "declarations": "Declarations require the Enterprise plan",
    "reports": "Reports require the Enterprise plan",
    "webhooks": "Webhooks require the Enterprise plan",
    "events": "Events require the Enterprise plan",
}

# The writes under /systems by what they do (method, route template): the message names
# the operation asked for, not the whole area.
_SYSTEM_WRITES: dict[tuple[str, str], str] = {
    ("POST", "/systems"): "Creating systems",
    ("PATCH", "/systems/{system_id}"): "Changing systems",
    ("DELETE", "/systems/{system_id}"): "Deleting systems",
    ("POST", "/systems/{system_id}/readings"): "Uploading readings",
    ("POST", "/systems/{system_id}/irradiance"): "Uploading irradiance",
    ("GET", "/systems/{system_id}/ingest-tokens"): "Listing ingest tokens",
    ("HEAD", "/systems/{system_id}/ingest-tokens"): "Listing ingest tokens",
    ("POST", "/systems/{system_id}/ingest-tokens"): "Creating ingest tokens",
    ("DELETE", "/systems/{system_id}/ingest-tokens/{token_id}"): "Revoking ingest tokens",
}
# What every plan can do instead (the dashboard, and a system's ingest token for readings).
_EVERY_PLAN = (
    "; on every plan the dashboard adds and changes systems, uploads readings CSVs and "
    "manages ingest tokens, with which a data logger uploads a system's readings "
    "(POST /api/v1/ingest/readings)"
)


def required_plan(method: str, template: str) -> Plan:
    if method in ("GET", "HEAD") and template in PRO_READABLE:
        return Plan.PRO
    return Plan.ENTERPRISE


# Kept per (plan, method, route template): a handful of each, asked on every API request.
@functools.cache
def plan_allows(plan: Plan, method: str, template: str) -> bool:
    if not PLAN_LIMITS[plan].api:
        return False
    needed = required_plan(method, template)
    return needed is Plan.PRO or plan is Plan.ENTERPRISE


def forbidden_message(plan: Plan, method: str, template: str) -> str:
    if not PLAN_LIMITS[plan].api:
        return (
            "The Starter plan has no API access; upgrade to Pro (read-only) or Enterprise "
            "(full access)"
        )
    group = template.strip("/").split("/", 1)[0]
    on_plan = f"this key's account is on the {plan.value.capitalize()} plan"
    if group == "systems":
        operation = _SYSTEM_WRITES.get((method, template), "Changing systems or their data")
        return f"{operation} through the API requires the Enterprise plan; {on_plan}{_EVERY_PLAN}"
    message = _GROUP_MESSAGES.get(group, "This operation requires the Enterprise plan")
    return f"{message}; {on_plan}"
