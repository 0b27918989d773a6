"""Declarations reports: the declarations whose period overlaps the report's, with their
status and history, from the declarations service."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.declarations import service as declaration_service
from solarapi.declarations.metering import period_bounds
from solarapi.declarations.views import DeclarationView
from solarapi.models.reports import ReportKind
from solarapi.models.systems import System
from solarapi.reports.document import (
    Cell,
    Chart,
    ReportContent,
    ReportContext,
    Table,
    facts,
    kwh,
    percent,
)

DECLARATION_COLUMNS = [
    "declaration_id",
    "system_id",
    "system_name",
    "type",
    "period_start",
    "period_end",
    "energy_wh",
    "metered_energy_wh",
    "coverage_ratio",
    "status",
    "status_reason",
    "reference",
    "created_at",
    "submitted_at",
    "decided_at",
    "history",
]


async def declarations(
    session: AsyncSession, context: ReportContext, systems: list[System]
) -> ReportContent:
    caller = context.caller  # the declarations service only reads for a report
    content = ReportContent(
        ReportKind.DECLARATIONS.heading,
        facts(context, systems),
        list(DECLARATION_COLUMNS),
        landscape=True,
    )
    listed = _Listed()
    for system in systems:
        for item in await _in_period(session, caller, context, system):
            transitions = [
                step.render()
                for step in await declaration_service.history(session, caller, item.id)
            ]
            _add_declaration(content, listed, system, item, transitions)
    _add_tables(content, context, listed)
    return content


@dataclass(slots=True)
class _Listed:
    """The PDF's rows and chart points, gathered over every system."""

    rows: list[list[Cell]] = field(default_factory=list)
    history_rows: list[list[Cell]] = field(default_factory=list)
    chart_x: list[datetime] = field(default_factory=list)
    chart_y: list[float | None] = field(default_factory=list)


async def _in_period(
    session: AsyncSession,
    caller: Caller,
    context: ReportContext,
    system: System,
) -> list[DeclarationView]:
    """The system's declarations whose period overlaps the report's, in period order."""
    found: list[DeclarationView] = []
    offset = 0
    while True:
        page, total = await declaration_service.list_declarations(
            session,
            caller,
            system_id=system.id,
            status=None,
            declaration_type=None,
            offset=offset,
            limit=100,
        )
        found.extend(page)
        offset += len(page)
        if not page or offset >= total:
            break
    start_s = int(context.start.timestamp())
    end_s = int(context.end.timestamp())
    in_period = [
        item
        for item in found
        if _overlaps(period_bounds(system, item.period_start, item.period_end), start_s, end_s)
    ]
    return sorted(in_period, key=lambda d: (d.period_start, d.created_at, d.id))


def _add_declaration(
    content: ReportContent,
    listed: _Listed,
    system: System,
    item: DeclarationView,
    transitions: list[dict[str, Any]],
) -> None:
    view = item.render()
    content.csv_rows.append(
        [
            view["id"],
            view["system_id"],
            system.name,
            view["type"],
            view["period_start"],
            view["period_end"],
            view["energy_wh"],
            view["metered_energy_wh"],
            view["coverage"],
            view["status"],
            view["status_reason"],
            view["reference"],
            view["created_at"],
            view["submitted_at"],
            view["decided_at"],
            "; ".join(_step_text(step) for step in transitions),
        ]
    )
    # The PDF names a declaration by its number in the report and the customer's reference,
    # not by the internal id (the CSV keeps the id).
    number = len(listed.rows) + 1
    listed.rows.append(
        [
            number,
            view["reference"],
            system.name,
            view["type"].replace("_", " "),
            f"{view['period_start']} – {view['period_end']}",
            kwh(view["energy_wh"]),
            kwh(view["metered_energy_wh"]),
            percent(view["coverage"]),
            view["status"],
        ]
    )
    for step in transitions:
        listed.history_rows.append(
            [
                number,
                step["at"].replace("T", " ").replace("Z", " UTC"),
                step["action"],
                f"{step['from'] or '—'} → {step['to']}",
                _actor(step["actor"]),
                step["reason"],
            ]
        )
    listed.chart_x.append(datetime.combine(item.period_start, datetime.min.time()))
    listed.chart_y.append(kwh(view["energy_wh"]))


def _add_tables(content: ReportContent, context: ReportContext, listed: _Listed) -> None:
    content.chart = Chart(
        "Declared energy per declaration (at the start of its period)",
        "Energy (kWh)",
        listed.chart_x,
        listed.chart_y,
        _declaration_bar_days(context),
        [f"{x:%Y-%m-%d}" for x in listed.chart_x],
    )
    content.tables.append(
        Table(
            "Declarations",
            [
                "No.",
                "Reference",
                "System",
                "Type",
                "Period (local days)",
                "Declared (kWh)",
                "Metered (kWh)",
                "Coverage",
                "Status",
            ],
            listed.rows,
        )
    )
    content.tables.append(
        Table(
            "History",
            ["No.", "At", "Action", "Status", "By", "Reason"],
            listed.history_rows,
        )
    )
    if not listed.rows:
        content.notes.append("No declaration of these systems overlaps the period.")
    content.notes.append(
        "A declaration is listed when its period (local days of its system) overlaps the "
        "report period."
    )


def _overlaps(bounds: tuple[int, int], start_s: int, end_s: int) -> bool:
    return bounds[0] < end_s and bounds[1] > start_s


def _actor(actor: str) -> str:
    """Who acted, without an internal key id: "API key", "operator" or "sandbox"."""
    return "API key" if actor.startswith("key_") else actor


def _step_text(step: dict[str, Any]) -> str:
    text = f"{step['at']} {step['action']} {step['from'] or '-'}->{step['to']} by {step['actor']}"
    return f"{text} ({step['reason']})" if step["reason"] else text


def _declaration_bar_days(context: ReportContext) -> float:
    span = (context.end - context.start) / timedelta(days=1)
    return max(1.0, min(20.0, span / 40))
