"""Building a report's content: its parameters as stored, its systems (still the caller's,
read in one query), its calendar, then the builder of its kind."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import assert_never

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.errors import ApiError
from solarapi.kit.plans import Environment
from solarapi.models.reports import Report, ReportKind
from solarapi.models.systems import System
from solarapi.reports.calendar import ReportCalendar
from solarapi.reports.declarations_report import declarations
from solarapi.reports.document import ReportContent, ReportContext, ReportFailed
from solarapi.reports.parameters import ReportParameters
from solarapi.reports.production_and_value import market_value, production
from solarapi.systems.access import find_systems


async def build(
    session: AsyncSession, report: Report, account_name: str, now: datetime
) -> ReportContent:
    parameters = ReportParameters.of_report(report)
    # The report's owner, as the narrow caller the source services take.
    caller = Caller(report.account_id, Environment(report.environment))
    systems = await _systems(session, caller, parameters.system_ids or ())
    try:
        calendar = ReportCalendar.of(
            parameters.start,
            parameters.end,
            parameters.interval,
            parameters.timezone,
            (system.timezone for system in systems),
        )
        context = ReportContext(report, parameters, calendar, account_name, caller, now)
        content = await _content(session, context, systems)
    except ApiError as exc:
        # A rule of the source refused (e.g. a system lost its market zone since the POST):
        # its message is written for clients already.
        raise ReportFailed(exc.message) from exc
    if content.chart is not None:
        content.chart = replace(content.chart, xlabel=calendar.period().text())
    return content


async def _content(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    kind = context.parameters.kind
    if kind is ReportKind.PRODUCTION:
        return await production(session, context, systems)
    if kind is ReportKind.MARKET_VALUE:
        return await market_value(session, context, systems)
    if kind is ReportKind.DECLARATIONS:
        return await declarations(session, context, systems)
    assert_never(kind)


async def _systems(
    session: AsyncSession, caller: Caller, system_ids: tuple[str, ...]
) -> list[System]:
    found = await find_systems(session, caller, system_ids)
    for system_id in system_ids:
        if system_id not in found:
            raise ReportFailed(
                f"system {system_id} was deleted after the report was requested; request the "
                "report again without it"
            )
    return [found[system_id] for system_id in system_ids]
