"""Request bodies and response shapes of declarations."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from solarapi.kit.openapi_fields import NEVER_NULL
from solarapi.kit.pagination import Pagination
from solarapi.kit.timefmt import parse_date
from solarapi.models.declarations import DeclarationType

# The values of `DeclarationType`, spelled out for the documentation (an enum would become a
# component of its own in the OpenAPI document).
TypeName = Literal["guarantee_of_origin", "production_subsidy", "feed_in"]
DECLARATION_TYPES: tuple[str, ...] = tuple(member.value for member in DeclarationType)


def _local_date(value: object) -> date:
    # Only the exact YYYY-MM-DD text: pydantic's lax date parsing would also take Unix
    # timestamps and datetimes, which for a calendar day in the system's zone is a guess.
    if not isinstance(value, str):
        raise ValueError("must be a date string in the form YYYY-MM-DD")
    return parse_date(value)


LocalDate = Annotated[
    date,
    BeforeValidator(_local_date),
    WithJsonSchema({"type": "string", "format": "date", "example": "2025-05-01"}),
]
# Strict: a JSON string where a number belongs is a client bug to report, not to coerce.
EnergyWh = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False, le=1e15)]
Reference = Annotated[str, Field(min_length=1, max_length=100)]


class DeclarationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system_id: Annotated[str, Field(min_length=1, max_length=40)]
    type: TypeName
    period_start: LocalDate = Field(description="First local day (system's time zone)")
    period_end: LocalDate = Field(description="Last local day, inclusive; before today")
    energy_wh: EnergyWh | None = Field(
        default=None, description="Declared energy; defaults to metered_energy_wh"
    )
    reference: Reference | None = None


class DeclarationUpdate(BaseModel):
    """Only the fields sent are changed. `energy_wh: null` resets the declared energy to the
    metered energy of the (possibly new) period; `reference: null` clears the reference."""

    model_config = ConfigDict(extra="forbid")

    period_start: Annotated[LocalDate | None, NEVER_NULL] = None
    period_end: Annotated[LocalDate | None, NEVER_NULL] = None
    energy_wh: EnergyWh | None = None
    reference: Reference | None = None


class DeclarationOut(BaseModel):
    id: str
    system_id: str
    type: TypeName
    period_start: date
    period_end: date
    energy_wh: float | None = Field(
        description="Declared energy; null while the period has no readings and none was stated"
    )
    metered_energy_wh: float | None = Field(
        description="Energy of the period's readings; null while it has no reading at all"
    )
    coverage: float = Field(
        description="Fraction of expected 15-minute readings present; a draft may have any "
        "coverage (0 without readings), submitting needs at least 0.95"
    )
    certificates: int | None = Field(
        description="Guarantees of origin issued (1 per whole MWh declared) once a "
        "guarantee_of_origin declaration is approved; null otherwise"
    )
    status: Literal["draft", "submitted", "approved", "rejected", "withdrawn"]
    status_reason: str | None
    reference: str | None
    created_at: str
    updated_at: str
    submitted_at: str | None
    decided_at: str | None


class DeclarationPage(BaseModel):
    data: list[DeclarationOut]
    pagination: Pagination


class TransitionOut(BaseModel):
    at: str
    actor: str = Field(description='API key id, "operator" (CLI) or "sandbox" (automatic)')
    action: Literal["create", "update", "delete", "submit", "withdraw", "approve", "reject"]
    # `from` is a Python keyword, hence the alias.
    from_: str | None = Field(alias="from")
    to: str
    reason: str | None


class HistoryOut(BaseModel):
    data: list[TransitionOut]
