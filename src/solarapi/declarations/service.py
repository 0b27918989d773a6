"""Declaration rules: validation of periods and energies, the state machine applied, the
overlap rule, the sandbox's immediate decision and the audit trail.

Every change to a system's declarations first takes the system's declaration lock (see
`repository.lock_system_declarations`), so the overlap check and the insert it guards, and two
transitions of one declaration, never interleave. Status changes are also compare-and-set
(`UPDATE … WHERE status = :from`), so a transition based on a stale read can never apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.declarations import repository
from solarapi.declarations.schemas import DECLARATION_TYPES, DeclarationCreate
from solarapi.declarations.statemachine import (
    CLAIMING_STATUSES,
    SYSTEM_PINNING_STATUSES,
    DeclarationAction,
    DeclarationStatus,
    TransitionNotAllowed,
    transition_for,
)
from solarapi.errors import Conflict, NotFound, ValidationFailed
from solarapi.events.service import record_event
from solarapi.kit.grid import Interval, local_midnight
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.models.declarations import Declaration, DeclarationTransition
from solarapi.models.systems import System

# Below this fraction of expected quarter-hours with a reading, a declaration cannot be
# submitted: the statement would rest on too much missing data.
MIN_SUBMIT_COVERAGE = 0.95
WH_PER_MWH = 1_000_000
# Bounds the work of one request (and keeps calendar arithmetic far from datetime's limits);
# a longer statement is split into several declarations.
MAX_PERIOD_DAYS = 366
EARLIEST_DAY = date(1970, 1, 1)
OPERATOR = "operator"
SANDBOX = "sandbox"

_EVENT_ACTIONS: dict[DeclarationAction, str] = {
    DeclarationAction.SUBMIT: "declaration.submitted",
    DeclarationAction.APPROVE: "declaration.approved",
    DeclarationAction.REJECT: "declaration.rejected",
    DeclarationAction.WITHDRAW: "declaration.withdrawn",
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who acts, and on which tenant's data."""

    account_id: str
    environment: Environment
    actor: str  # the API key id


@dataclass(frozen=True, slots=True)
class Metering:
    """What the readings say about a period."""

    energy_wh: float | None  # None: not a single reading in the period
    samples: int
    expected_samples: int

    @property
    def coverage(self) -> float:
        # Rounded down to 3 decimals, so the shown value never reads 0.95 while submit
        # refuses it for being below 0.95.
        if self.expected_samples == 0:
            return 0.0
        return (self.samples * 1000 // self.expected_samples) / 1000


# --- reading the metered energy ---------------------------------------------------------------


def period_bounds(system: System, period_start: date, period_end: date) -> tuple[int, int]:
    """UTC epoch seconds [start, end) of the local days period_start..period_end (inclusive)."""
    tz = ZoneInfo(system.timezone)
    return local_midnight(period_start, tz), local_midnight(period_end + timedelta(days=1), tz)


async def measure_period(
    session: AsyncSession, system: System, period_start: date, period_end: date, now: datetime
) -> Metering:
    """Metered energy and coverage of the period, computed by the readings code exactly as
    `GET /systems/{id}/readings?interval=1d` computes its `meta.totals` for the same local
    days — one source of truth, so the two numbers can never disagree."""
    from solarapi.readings.service import aggregate

    start_s, end_s = period_bounds(system, period_start, period_end)
    body = await aggregate(
        session,
        system,
        datetime.fromtimestamp(start_s, UTC),
        datetime.fromtimestamp(end_s, UTC),
        Interval.DAY,
        now,
    )
    totals = body["meta"]["totals"]
    energy = totals["energy_wh"]
    return Metering(
        None if energy is None else float(energy),
        int(totals["samples"]),
        int(totals["expected_samples"]),
    )


# --- validation -----------------------------------------------------------------------------


def local_today(system: System, now: datetime) -> date:
    return now.astimezone(ZoneInfo(system.timezone)).date()


def validate_period(system: System, period_start: date, period_end: date, now: datetime) -> None:
    if period_start > period_end:
        raise ValidationFailed(
            f"period_start ({period_start.isoformat()}) must not be after period_end "
            f"({period_end.isoformat()})"
        )
    if period_start < EARLIEST_DAY:
        raise ValidationFailed(
            f"period_start must not be before {EARLIEST_DAY.isoformat()}; "
            f"got {period_start.isoformat()}"
        )
    days = (period_end - period_start).days + 1
    if days > MAX_PERIOD_DAYS:
        raise ValidationFailed(
            f"the period spans {days} days, more than the {MAX_PERIOD_DAYS} allowed; split it "
            "into several declarations"
        )
    today = local_today(system, now)
    if period_end >= today:
        raise ValidationFailed(
            f"period_end must be before today ({today.isoformat()} in the system's time zone "
            f"{system.timezone}): a declaration covers whole past days only; "
            f"got {period_end.isoformat()}"
        )


def validate_energy(energy_wh: float, metered_energy_wh: float, declaration_type: str) -> None:
    if energy_wh > metered_energy_wh:
        raise ValidationFailed(
            f"energy_wh ({energy_wh:g}) exceeds the metered energy of the period "
            f"({metered_energy_wh:g} Wh); a {declaration_type} declaration may state at "
            f"most what was metered"
        )


def require_readings(metering: Metering, period_start: date, period_end: date) -> float:
    if metering.energy_wh is None:
        raise ValidationFailed(
            f"the period {period_start.isoformat()}..{period_end.isoformat()} has no readings; "
            "upload the system's readings before declaring its production"
        )
    return metering.energy_wh


# --- presentation ---------------------------------------------------------------------------


def certificates(declaration: Declaration) -> int | None:
    """Guarantees of origin: one per whole MWh declared, once approved."""
    if (
        declaration.type == "guarantee_of_origin"
        and declaration.status == DeclarationStatus.APPROVED
    ):
        return int(declaration.energy_wh // WH_PER_MWH)
    return None


def declaration_view(declaration: Declaration) -> dict[str, Any]:
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


def transition_view(transition: DeclarationTransition) -> dict[str, Any]:
    return {
        "at": format_timestamp(transition.at),
        "actor": transition.actor,
        "action": transition.action,
        "from": transition.from_status,
        "to": transition.to_status,
        "reason": transition.reason,
    }


# --- lookups --------------------------------------------------------------------------------


async def _owned_system(session: AsyncSession, caller: Caller, system_id: str) -> System:
    system = await repository.get_system(session, caller.account_id, caller.environment, system_id)
    if system is None:
        raise NotFound(f"No system {system_id} in this account's {caller.environment} data")
    return system


async def get_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str
) -> Declaration:
    found = await repository.get_declaration(
        session, caller.account_id, caller.environment, declaration_id
    )
    if found is None:
        raise NotFound(
            f"No declaration {declaration_id} in this account's {caller.environment} data"
        )
    return found


async def list_declarations(
    session: AsyncSession,
    caller: Caller,
    *,
    system_id: str | None,
    status: str | None,
    declaration_type: str | None,
    offset: int,
    limit: int,
) -> tuple[Sequence[Declaration], int]:
    if status is not None and status not in set(DeclarationStatus):
        names = ", ".join(s.value for s in DeclarationStatus)
        raise ValidationFailed(f"status must be one of {names}; got '{status}'")
    if declaration_type is not None and declaration_type not in DECLARATION_TYPES:
        raise ValidationFailed(
            f"type must be one of {', '.join(DECLARATION_TYPES)}; got '{declaration_type}'"
        )
    if system_id is not None:
        await _owned_system(session, caller, system_id)
    return await repository.list_declarations(
        session,
        account_id=caller.account_id,
        environment=caller.environment,
        system_id=system_id,
        status=status,
        declaration_type=declaration_type,
        offset=offset,
        limit=limit,
    )


async def history(
    session: AsyncSession, caller: Caller, declaration_id: str
) -> Sequence[DeclarationTransition]:
    declaration = await get_declaration(session, caller, declaration_id)
    return await repository.list_transitions(session, declaration.id)


# --- the transitions ------------------------------------------------------------------------


def _refuse(declaration_id: str, status: str, action: DeclarationAction) -> Conflict:
    if status == "deleted":
        return Conflict(f"Declaration {declaration_id} was deleted meanwhile")
    refusal = TransitionNotAllowed(
        DeclarationStatus(status), action, subject=f"Declaration {declaration_id}"
    )
    return Conflict(str(refusal))


def _check_allowed(declaration: Declaration, action: DeclarationAction) -> None:
    try:
        transition_for(DeclarationStatus(declaration.status), action)
    except TransitionNotAllowed:
        raise _refuse(declaration.id, declaration.status, action) from None


async def _check_overlap(
    session: AsyncSession,
    *,
    system_id: str,
    declaration_type: str,
    period_start: date,
    period_end: date,
    exclude_id: str | None,
) -> None:
    other = await repository.find_overlapping(
        session,
        system_id=system_id,
        declaration_type=declaration_type,
        period_start=period_start,
        period_end=period_end,
        statuses=[s.value for s in CLAIMING_STATUSES],
        exclude_id=exclude_id,
    )
    if other is not None:
        raise Conflict(
            f"the period {period_start.isoformat()}..{period_end.isoformat()} overlaps "
            f"{other.id} ({other.status}, {other.period_start.isoformat()}.."
            f"{other.period_end.isoformat()}) of the same system and type; withdraw or delete "
            "it, or choose a period that does not overlap"
        )


async def _record(
    session: AsyncSession,
    declaration: Declaration,
    *,
    action: DeclarationAction,
    from_status: str | None,
    actor: str,
    reason: str | None,
    now: datetime,
) -> None:
    await repository.add_transition(
        session,
        DeclarationTransition(
            declaration_id=declaration.id,
            at=now,
            actor=actor,
            action=action.value,
            from_status=from_status,
            to_status=declaration.status,
            reason=reason,
        ),
    )
    event_type = _EVENT_ACTIONS.get(action)
    if event_type is not None:
        await record_event(
            session,
            account_id=declaration.account_id,
            environment=declaration.environment,
            event_type=event_type,
            data=declaration_view(declaration),
        )


async def _transition(
    session: AsyncSession,
    declaration: Declaration,
    action: DeclarationAction,
    values: dict[str, Any],
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> Declaration:
    """Apply one row of the table with compare-and-set on the status; record it."""
    from_status = declaration.status
    rule = transition_for(DeclarationStatus(from_status), action)
    assert rule.target is not None
    changes = {**values, "status": rule.target.value, "updated_at": now}
    if not await repository.update_if_status(session, declaration.id, from_status, changes):
        # Only reachable if the lock was bypassed (e.g. a writer outside this service).
        current = await repository.get_declaration_by_id(session, declaration.id)
        raise _refuse(declaration.id, current.status if current else "deleted", action)
    updated = await repository.get_declaration_by_id(session, declaration.id)
    assert updated is not None
    await _record(
        session,
        updated,
        action=action,
        from_status=from_status,
        actor=actor,
        reason=reason,
        now=now,
    )
    return updated


async def _locked_reload(
    session: AsyncSession, declaration: Declaration, action: DeclarationAction
) -> Declaration:
    """Take the system's lock, then re-read: the status checked is the status changed."""
    await repository.lock_system_declarations(session, declaration.system_id)
    fresh = await repository.get_declaration_by_id(session, declaration.id)
    if fresh is None:
        raise _refuse(declaration.id, "deleted", action)
    _check_allowed(fresh, action)
    return fresh


async def create_declaration(
    session: AsyncSession, caller: Caller, body: DeclarationCreate, now: datetime
) -> Declaration:
    system = await _owned_system(session, caller, body.system_id)
    validate_period(system, body.period_start, body.period_end, now)
    metering = await measure_period(session, system, body.period_start, body.period_end, now)
    metered = require_readings(metering, body.period_start, body.period_end)
    energy_wh = metered if body.energy_wh is None else body.energy_wh
    validate_energy(energy_wh, metered, body.type)

    await repository.lock_system_declarations(session, system.id)
    await _check_overlap(
        session,
        system_id=system.id,
        declaration_type=body.type,
        period_start=body.period_start,
        period_end=body.period_end,
        exclude_id=None,
    )
    declaration = Declaration(
        id=new_id("dcl"),
        account_id=caller.account_id,
        environment=caller.environment.value,
        system_id=system.id,
        type=body.type,
        period_start=body.period_start,
        period_end=body.period_end,
        energy_wh=energy_wh,
        metered_energy_wh=metered,
        coverage=metering.coverage,
        status=DeclarationStatus.DRAFT.value,
        status_reason=None,
        reference=body.reference,
        created_at=now,
        updated_at=now,
        submitted_at=None,
        decided_at=None,
    )
    await repository.insert_declaration(session, declaration)
    await _record(
        session,
        declaration,
        action=DeclarationAction.CREATE,
        from_status=None,
        actor=caller.actor,
        reason=None,
        now=now,
    )
    return declaration


async def update_declaration(
    session: AsyncSession,
    caller: Caller,
    declaration_id: str,
    changes: dict[str, Any],
    now: datetime,
) -> Declaration:
    """`changes` holds only the fields the client sent (`energy_wh: None` = use metered)."""
    declaration = await get_declaration(session, caller, declaration_id)
    for name in ("period_start", "period_end"):
        if name in changes and changes[name] is None:
            raise ValidationFailed(f"{name}: may not be null")
    system = await repository.get_system_by_id(session, declaration.system_id)
    assert system is not None  # the foreign key cascades
    period_start: date = changes.get("period_start", declaration.period_start)
    period_end: date = changes.get("period_end", declaration.period_end)
    validate_period(system, period_start, period_end, now)
    metering = await measure_period(session, system, period_start, period_end, now)
    metered = require_readings(metering, period_start, period_end)
    if "energy_wh" in changes:
        energy_wh = metered if changes["energy_wh"] is None else float(changes["energy_wh"])
    else:
        energy_wh = declaration.energy_wh
    validate_energy(energy_wh, metered, declaration.type)

    declaration = await _locked_reload(session, declaration, DeclarationAction.UPDATE)
    await _check_overlap(
        session,
        system_id=declaration.system_id,
        declaration_type=declaration.type,
        period_start=period_start,
        period_end=period_end,
        exclude_id=declaration.id,
    )
    values: dict[str, Any] = {
        "period_start": period_start,
        "period_end": period_end,
        "energy_wh": energy_wh,
        "metered_energy_wh": metered,
        "coverage": metering.coverage,
    }
    if "reference" in changes:
        values["reference"] = changes["reference"]
    return await _transition(
        session,
        declaration,
        DeclarationAction.UPDATE,
        values,
        actor=caller.actor,
        reason=None,
        now=now,
    )


async def delete_declaration(session: AsyncSession, caller: Caller, declaration_id: str) -> None:
    declaration = await get_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.DELETE)
    if not await repository.delete_if_status(session, declaration.id, declaration.status):
        raise _refuse(declaration.id, "deleted", DeclarationAction.DELETE)


async def submit_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str, now: datetime
) -> Declaration:
    declaration = await get_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.SUBMIT)
    system = await repository.get_system_by_id(session, declaration.system_id)
    assert system is not None
    metering = await measure_period(
        session, system, declaration.period_start, declaration.period_end, now
    )
    metered = require_readings(metering, declaration.period_start, declaration.period_end)
    if metering.coverage < MIN_SUBMIT_COVERAGE:
        raise Conflict(
            f"coverage is {metering.coverage:.3f}: only {metering.samples} of "
            f"{metering.expected_samples} quarter-hours of the period have a reading, and a "
            f"declaration needs at least {MIN_SUBMIT_COVERAGE:.2f} to be submitted; upload "
            "the missing readings, then submit again"
        )
    submitted = await _transition(
        session,
        declaration,
        DeclarationAction.SUBMIT,
        {"metered_energy_wh": metered, "coverage": metering.coverage, "submitted_at": now},
        actor=caller.actor,
        reason=None,
        now=now,
    )
    if caller.environment is Environment.TEST:
        submitted = await _decide_in_sandbox(session, submitted, now)
    return submitted


async def _decide_in_sandbox(
    session: AsyncSession, declaration: Declaration, now: datetime
) -> Declaration:
    """The sandbox's issuing body answers at once, by the contract's rule."""
    if declaration.energy_wh <= declaration.metered_energy_wh:
        return await decide(session, declaration, approve=True, reason=None, actor=SANDBOX, now=now)
    reason = (
        f"declared energy_wh {declaration.energy_wh:g} exceeds the metered "
        f"{declaration.metered_energy_wh:g} Wh of the period"
    )
    return await decide(session, declaration, approve=False, reason=reason, actor=SANDBOX, now=now)


async def withdraw_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str, now: datetime
) -> Declaration:
    declaration = await get_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.WITHDRAW)
    return await _transition(
        session,
        declaration,
        DeclarationAction.WITHDRAW,
        {},
        actor=caller.actor,
        reason=None,
        now=now,
    )


async def decide(
    session: AsyncSession,
    declaration: Declaration,
    *,
    approve: bool,
    reason: str | None,
    actor: str,
    now: datetime,
) -> Declaration:
    action = DeclarationAction.APPROVE if approve else DeclarationAction.REJECT
    if not approve and not (reason and reason.strip()):
        raise ValidationFailed("a rejection needs a reason (--reason TEXT) for the customer")
    declaration = await _locked_reload(session, declaration, action)
    return await _transition(
        session,
        declaration,
        action,
        {"decided_at": now, "status_reason": reason},
        actor=actor,
        reason=reason,
        now=now,
    )


async def decide_as_operator(
    session: AsyncSession, declaration_id: str, *, approve: bool, reason: str | None, now: datetime
) -> Declaration:
    """The issuing body's answer for a live declaration, entered by the operator (CLI)."""
    declaration = await repository.get_declaration_by_id(session, declaration_id)
    if declaration is None:
        raise NotFound(f"No declaration {declaration_id}")
    return await decide(
        session, declaration, approve=approve, reason=reason, actor=OPERATOR, now=now
    )


async def pending_declarations(
    session: AsyncSession, environment: Environment | None, limit: int
) -> Sequence[Declaration]:
    return await repository.list_by_status(
        session,
        DeclarationStatus.SUBMITTED.value,
        environment.value if environment else None,
        limit,
    )


async def blocks_system_deletion(session: AsyncSession, system_id: str) -> bool:
    """True while the system has a submitted or approved declaration.

    Takes the system's declaration lock, so a submit racing the deletion either commits first
    (and blocks it) or waits until the deletion is done.
    """
    await repository.lock_system_declarations(session, system_id)
    return await repository.has_declaration_in(
        session, system_id, [s.value for s in SYSTEM_PINNING_STATUSES]
    )
