"""The JSON shapes of declarations and their history, as the API shows them."""

from __future__ import annotations

from typing import Any

from solarapi.declarations.statemachine import DeclarationStatus
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.declarations import Declaration, DeclarationTransition

WH_PER_MWH = 1_000_000


def certificates(declaration: Declaration) -> int | None:
    """Guarantees of origin: one per whole MWh declared, once approved."""
    if (
        declaration.type == "guarantee_of_origin"
        and declaration.status == DeclarationStatus.APPROVED
        and declaration.energy_wh is not None
    ):
        return int(declaration.energy_wh // WH_PER_MWH)
    return None


def declaration_to_api(declaration: Declaration) -> dict[str, Any]:
    return {
        "id": declaration.id,
        "system_id": declaration.system_id,
        "type": declaration.type,
        "period_start": declaration.period_start.isoformat(),
        "period_end": declaration.period_end.isoformat(),
        "energy_wh": declaration.energy_wh,
        "metered_energy_wh": declaration.metered_energy_wh,
        "coverage": declaration.coverage,
        "certificates": certificates(declaration),
        "status": declaration.status,
        "status_reason": declaration.status_reason,
        "reference": declaration.reference,
        "created_at": format_timestamp(declaration.created_at),
        "updated_at": format_timestamp(declaration.updated_at),
        "submitted_at": format_optional(declaration.submitted_at),
        "decided_at": format_optional(declaration.decided_at),
    }


def transition_to_api(transition: DeclarationTransition) -> dict[str, Any]:
    return {
        "at": format_timestamp(transition.at),
        "actor": transition.actor,
        "action": transition.action,
        "from": transition.from_status,
        "to": transition.to_status,
        "reason": transition.reason,
    }
