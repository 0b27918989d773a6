"""Building a report's content: the report's systems (still the caller's), then the builder
of its type."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ApiError, NotFound
from solarapi.models.systems import System
from solarapi.reports.content import ReportContent, ReportContext, ReportFailed, local_period
from solarapi.reports.declared import declarations
from solarapi.reports.series import market_value, production
from solarapi.systems.access import get_system


async def build(session: AsyncSession, context: ReportContext) -> ReportContent:
    systems = await _systems(session, context)
    builders = {
        "production": production,
        "market_value": market_value,
        "declarations": declarations,
    }
    try:
        content = await builders[context.report.type](session, context, systems)
    except ApiError as exc:
        # A rule of the source refused (e.g. a system lost its market zone since the POST):
        # its message is written for clients already.
        raise ReportFailed(exc.message) from exc
    if content.chart is not None:
        period = local_period(context.start, context.end, (s.timezone for s in systems))
        content.chart = replace(content.chart, xlabel=period.text())
    return content


async def _systems(session: AsyncSession, context: ReportContext) -> list[System]:
    systems = []
    for system_id in context.system_ids:
        try:
            systems.append(await get_system(session, context.principal, system_id))
        except NotFound:
            raise ReportFailed(
                f"system {system_id} was deleted after the report was requested; request the "
                "report again without it"
            ) from None
    return systems
