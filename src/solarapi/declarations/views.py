"""Declarations and their history as the API shows them: frozen typed values the service
returns (`DeclarationView`, `TransitionView`), each rendered to its JSON shape in one place
(`render`; documented by `schemas.DeclarationOut` and `schemas.TransitionOut`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.declarations import (
    Declaration,
    DeclarationAction,
    DeclarationStatus,
    DeclarationTransition,
    DeclarationType,
)

WH_PER_MWH = 1_000_000


def certificates(declaration: Declaration) -> int | None:
    """Guarantees of origin: one per whole MWh declared, once approved."""
    if (
        declaration.type == DeclarationType.GUARANTEE_OF_ORIGIN
        and declaration.status == DeclarationStatus.APPROVED
        and declaration.energy_wh is not None
    ):
        return int(declaration.energy_wh // WH_PER_MWH)
    return None


@dataclass(frozen=True, slots=True)
class DeclarationView:
    id: str
    account_id: str  # not shown by the API (the caller's own); the operator's CLI lists it
    system_id: str
    type: DeclarationType
    period_start: date
    period_end: date
    energy_wh: float | None
    metered_energy_wh: float | None
    coverage: float
    certificates: int | None
    status: DeclarationStatus
    status_reason: str | None
    reference: str | None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None
    decided_at: datetime | None

    @classmethod
    def of(cls, declaration: Declaration) -> DeclarationView:
        return cls(
            id=declaration.id,
            account_id=declaration.account_id,
            system_id=declaration.system_id,
            type=declaration.type,
            period_start=declaration.period_start,
            period_end=declaration.period_end,
            energy_wh=declaration.energy_wh,
            metered_energy_wh=declaration.metered_energy_wh,
            coverage=declaration.coverage,
            certificates=certificates(declaration),
            status=declaration.status,
            status_reason=declaration.status_reason,
            reference=declaration.reference,
            created_at=declaration.created_at,
            updated_at=declaration.updated_at,
            submitted_at=declaration.submitted_at,
            decided_at=declaration.decided_at,
        )

    def render(self) -> dict[str, Any]:
        """The JSON shape (`schemas.DeclarationOut`): of the API's answers, the webhook
        events' `data` and the reports."""
        return {
            "id": self.id,
            "system_id": self.system_id,
            "type": self.type,
            "period_start": self.period_start.isoformat(),
            "period_end": self.period_end.isoformat(),
            "energy_wh": self.energy_wh,
            "metered_energy_wh": self.metered_energy_wh,
            "coverage": self.coverage,
            "certificates": self.certificates,
            "status": self.status,
            "status_reason": self.status_reason,
            "reference": self.reference,
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
            "submitted_at": format_optional(self.submitted_at),
            "decided_at": format_optional(self.decided_at),
        }


@dataclass(frozen=True, slots=True)
class TransitionView:
    at: datetime
    actor: str
    action: DeclarationAction
    from_status: DeclarationStatus | None
    to_status: DeclarationStatus
    reason: str | None

    @classmethod
    def of(cls, transition: DeclarationTransition) -> TransitionView:
        return cls(
            at=transition.at,
            actor=transition.actor,
            action=transition.action,
            from_status=transition.from_status,
            to_status=transition.to_status,
            reason=transition.reason,
        )

    def render(self) -> dict[str, Any]:
        """The JSON shape (`schemas.TransitionOut`)."""
        return {
            "at": format_timestamp(self.at),
            "actor": self.actor,
            "action": self.action,
            "from": self.from_status,
            "to": self.to_status,
            "reason": self.reason,
        }
