"""The three plans and their limits: the one place that knows them."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Plan(enum.StrEnum):
    STARTER = "starter"
    PRO = "pro"
    ENTERPRISE = "enterprise"


class Environment(enum.StrEnum):
    LIVE = "live"
    TEST = "test"


@dataclass(frozen=True, slots=True)
class PlanLimits:
    api: bool
    write: bool
    per_minute: int
    per_day: int


PLAN_LIMITS: dict[Plan, PlanLimits] = {
    Plan.STARTER: PlanLimits(api=False, write=False, per_minute=0, per_day=0),
    Plan.PRO: PlanLimits(api=True, write=False, per_minute=60, per_day=10_000),
    Plan.ENTERPRISE: PlanLimits(api=True, write=True, per_minute=300, per_day=100_000),
}

PLAN_DESCRIPTIONS: dict[Plan, str] = {
    Plan.STARTER: "Dashboard only, no API keys: add and edit systems, upload readings CSVs, "
    "give data loggers ingest tokens, see charts and usage.",
    Plan.PRO: "Everything of Starter, plus a read-only API: account, systems, readings, "
    "summaries, market prices and market value. 60 requests per minute, 10,000 per day.",
    Plan.ENTERPRISE: "Everything of Pro, plus the full API: writes, declarations, reports and "
    "webhooks. 300 requests per minute, 100,000 per day.",
}
