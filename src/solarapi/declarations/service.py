"""Declaration rules: validation of periods and energies, the state machine applied, the
overlap rule, the sandbox's immediate decision and the audit trail.

Every change to a system's declarations first takes the system's lock (see
`systems.repository.lock`), so the overlap check and the insert it guards, and two
transitions of one declaration, never interleave. Status changes are also compare-and-set
(`UPDATE … WHERE status = :from`), so a transition based on a stale read can never apply.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.declarations import repository
from solarapi.declarations.metering import (
    MIN_SUBMIT_COVERAGE,
    measure_period,
    validate_energy,
    validate_period,
)
from solarapi.declarations.schemas import DECLARATION_TYPES, DeclarationCreate, DeclarationUpdate
from solarapi.declarations.statemachine import (
    CLAIMING_STATUSES,
    SYSTEM_PINNING_STATUSES,
    DeclarationAction,
    DeclarationStatus,
    TransitionNotAllowed,
    transition_for,
)
from solarapi.declarations.views import DeclarationView, TransitionView
from solarapi.errors import Conflict, NotFound, ValidationFailed
from solarapi.events.service import record_event
from solarapi.kit.ids import new_id
from solarapi.kit.plans import Environment
from solarapi.kit.text import energy_text, excerpt
from solarapi.models.declarations import Declaration, DeclarationTransition, DeclarationType
from solarapi.models.systems import System
from solarapi.models.webhooks import EventType
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import tenant_system

OPERATOR = "operator"
SANDBOX = "sandbox"

_EVENT_ACTIONS: dict[DeclarationAction, EventType] = {
    DeclarationAction.SUBMIT: EventType.DECLARATION_SUBMITTED,
    DeclarationAction.APPROVE: EventType.DECLARATION_APPROVED,
    DeclarationAction.REJECT: EventType.DECLARATION_REJECTED,
    DeclarationAction.WITHDRAW: EventType.DECLARATION_WITHDRAWN,
}


# --- lookups --------------------------------------------------------------------------------


async def _owned_system(session: AsyncSession, caller: Caller, system_id: str) -> System:
    return tenant_system(
        await systems_repository.get(session, system_id),
        system_id,
        account_id=caller.account_id,
        environment=caller.environment,
    )


async def _locked_system(session: AsyncSession, system_id: str) -> System:
    """The system under its lock, re-read (`systems.repository.lock_fresh`)."""
    system = await systems_repository.lock_fresh(session, system_id)
    if system is None:
        raise NotFound(f"No system with id '{excerpt(system_id)}'")
    return system


async def get_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str
) -> DeclarationView:
    return DeclarationView.of(await _owned_declaration(session, caller, declaration_id))


async def _owned_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str
) -> Declaration:
    found = await repository.get_declaration(
        session, caller.account_id, caller.environment, declaration_id
    )
    if found is None:
        raise NotFound(
            f"No declaration {excerpt(declaration_id)} in this account's {caller.environment} data"
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
) -> tuple[list[DeclarationView], int]:
    if status is not None and status not in set(DeclarationStatus):
        names = ", ".join(s.value for s in DeclarationStatus)
        raise ValidationFailed(f"status must be one of {names}; got '{excerpt(status)}'")
    if declaration_type is not None and declaration_type not in DECLARATION_TYPES:
        raise ValidationFailed(
            f"type must be one of {', '.join(DECLARATION_TYPES)}; got '{excerpt(declaration_type)}'"
        )
    if system_id is not None:
        await _owned_system(session, caller, system_id)
    rows, total = await repository.list_declarations(
        session,
        account_id=caller.account_id,
        environment=caller.environment,
        system_id=system_id,
        status=None if status is None else DeclarationStatus(status),
        declaration_type=None if declaration_type is None else DeclarationType(declaration_type),
        offset=offset,
        limit=limit,
    )
    return [DeclarationView.of(row) for row in rows], total


async def history(
    session: AsyncSession, caller: Caller, declaration_id: str
) -> list[TransitionView]:
    declaration = await _owned_declaration(session, caller, declaration_id)
    return [
        TransitionView.of(step)
        for step in await repository.list_transitions(session, declaration.id)
    ]


# --- the transitions ------------------------------------------------------------------------


def _refuse(
    declaration_id: str, status: DeclarationStatus | None, action: DeclarationAction
) -> Conflict:
    """409 for `action` on a declaration in `status` (None: deleted meanwhile)."""
    if status is None:
        return Conflict(f"Declaration {declaration_id} was deleted meanwhile")
    refusal = TransitionNotAllowed(status, action, subject=f"Declaration {declaration_id}")
    return Conflict(str(refusal))


def _check_allowed(declaration: Declaration, action: DeclarationAction) -> None:
    try:
        transition_for(declaration.status, action)
    except TransitionNotAllowed:
        raise _refuse(declaration.id, declaration.status, action) from None


async def _check_overlap(
    session: AsyncSession,
    *,
    system_id: str,
    declaration_type: DeclarationType,
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
        statuses=CLAIMING_STATUSES,
        exclude_id=exclude_id,
    )
    if other is not None:
        raise Conflict(
            f"the period {period_start.isoformat()}..{period_end.isoformat()} overlaps "
            f"{other.id} ({other.status}, {other.period_start.isoformat()}.."
            f"{other.period_end.isoformat()}) of the same system and type; "
            f"{_OVERLAP_ADVICE[other.status]}"
        )


# What frees a claimed period, by the claiming declaration's status: an approved one is final.
_OVERLAP_ADVICE: dict[DeclarationStatus, str] = {
    DeclarationStatus.DRAFT: "delete it, or choose a period that does not overlap",
    DeclarationStatus.SUBMITTED: "withdraw it, or choose a period that does not overlap",
    DeclarationStatus.APPROVED: "it is approved, which is final: choose a period that does not "
    "overlap",
}


async def _record(
    session: AsyncSession,
    declaration: Declaration,
    *,
    action: DeclarationAction,
    from_status: DeclarationStatus | None,
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
            action=action,
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
            data=DeclarationView.of(declaration).render(),
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
    rule = transition_for(from_status, action)
    assert rule.target is not None
    changes = {**values, "status": rule.target, "updated_at": now}
    if not await repository.update_if_status(session, declaration.id, from_status, changes):
        # Only reachable if the lock was bypassed (e.g. a writer outside this service).
        current = await repository.get_declaration_by_id(session, declaration.id)
        raise _refuse(declaration.id, current.status if current else None, action)
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
    await systems_repository.lock(session, declaration.system_id)
    fresh = await repository.get_declaration_by_id(session, declaration.id)
    if fresh is None:
        raise _refuse(declaration.id, None, action)
    _check_allowed(fresh, action)
    return fresh


async def create_declaration(
    session: AsyncSession, caller: Caller, body: DeclarationCreate, now: datetime, *, actor: str
) -> DeclarationView:
    await _owned_system(session, caller, body.system_id)
    # Locked before anything is measured: the period's days follow the system's time zone,
    # which a concurrent PATCH may be changing (the metering goes through the same rollups).
    system = await _locked_system(session, body.system_id)
    validate_period(system, body.period_start, body.period_end, now)
    # A period without readings is a valid draft (coverage 0, energies null): the contract
    # gates submission on coverage, not creation.
    metering = await measure_period(session, system, body.period_start, body.period_end, now)
    metered = metering.energy_wh
    energy_wh = metered if body.energy_wh is None else body.energy_wh
    declaration_type = DeclarationType(body.type)
    validate_energy(energy_wh, metered, declaration_type)

    await _check_overlap(
        session,
        system_id=system.id,
        declaration_type=declaration_type,
        period_start=body.period_start,
        period_end=body.period_end,
        exclude_id=None,
    )
    declaration = Declaration(
        id=new_id("dcl"),
        account_id=caller.account_id,
        environment=caller.environment,
        system_id=system.id,
        type=declaration_type,
        period_start=body.period_start,
        period_end=body.period_end,
        energy_wh=energy_wh,
        metered_energy_wh=metered,
        coverage=metering.coverage,
        status=DeclarationStatus.DRAFT,
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
        actor=actor,
        reason=None,
        now=now,
    )
    return DeclarationView.of(declaration)


async def update_declaration(
    session: AsyncSession,
    caller: Caller,
    declaration_id: str,
    body: DeclarationUpdate,
    now: datetime,
    *,
    actor: str,
) -> DeclarationView:
    """Only the fields the client sent change (`energy_wh: null` = use metered)."""
    given = body.model_fields_set
    declaration = await _owned_declaration(session, caller, declaration_id)
    for name in ("period_start", "period_end"):
        if name in given and getattr(body, name) is None:
            raise ValidationFailed(f"{name}: may not be null")
    declaration = await _locked_reload(session, declaration, DeclarationAction.UPDATE)
    system = await _locked_system(session, declaration.system_id)
    period_start = body.period_start or declaration.period_start
    period_end = body.period_end or declaration.period_end
    validate_period(system, period_start, period_end, now)
    metering = await measure_period(session, system, period_start, period_end, now)
    metered = metering.energy_wh
    energy_wh: float | None
    if "energy_wh" in given:
        energy_wh = metered if body.energy_wh is None else float(body.energy_wh)
    else:
        # Never stated (the draft had no readings): it still follows the metered energy.
        energy_wh = metered if declaration.energy_wh is None else declaration.energy_wh
    validate_energy(energy_wh, metered, declaration.type)

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
    if "reference" in given:
        values["reference"] = body.reference
    updated = await _transition(
        session,
        declaration,
        DeclarationAction.UPDATE,
        values,
        actor=actor,
        reason=None,
        now=now,
    )
    return DeclarationView.of(updated)


async def delete_declaration(session: AsyncSession, caller: Caller, declaration_id: str) -> None:
    declaration = await _owned_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.DELETE)
    if not await repository.delete_if_status(session, declaration.id, declaration.status):
        raise _refuse(declaration.id, None, DeclarationAction.DELETE)


async def submit_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str, now: datetime, *, actor: str
) -> DeclarationView:
    declaration = await _owned_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.SUBMIT)
    system = await _locked_system(session, declaration.system_id)
    metering = await measure_period(
        session, system, declaration.period_start, declaration.period_end, now
    )
    metered = metering.energy_wh
    if metered is None or metering.coverage < MIN_SUBMIT_COVERAGE:
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
        {
            "metered_energy_wh": metered,
            "coverage": metering.coverage,
            "submitted_at": now,
            # A draft created before its readings states no energy: it declares the metered.
            "energy_wh": metered if declaration.energy_wh is None else declaration.energy_wh,
        },
        actor=actor,
        reason=None,
        now=now,
    )
    if caller.environment is Environment.TEST:
        submitted = await _decide_in_sandbox(session, submitted, now)
    return DeclarationView.of(submitted)


async def _decide_in_sandbox(
    session: AsyncSession, declaration: Declaration, now: datetime
) -> Declaration:
    """The sandbox's issuing body answers at once, by the contract's rule."""
    energy_wh, metered_energy_wh = declaration.energy_wh, declaration.metered_energy_wh
    # Submitted, so the period had readings (coverage >= 0.95) and both were set.
    assert energy_wh is not None
    assert metered_energy_wh is not None
    if energy_wh <= metered_energy_wh:
        return await decide(session, declaration, approve=True, reason=None, actor=SANDBOX, now=now)
    reason = (
        f"declared energy_wh {energy_text(energy_wh)} exceeds the metered "
        f"{energy_text(metered_energy_wh)} Wh of the period"
    )
    return await decide(session, declaration, approve=False, reason=reason, actor=SANDBOX, now=now)


async def withdraw_declaration(
    session: AsyncSession, caller: Caller, declaration_id: str, now: datetime, *, actor: str
) -> DeclarationView:
    declaration = await _owned_declaration(session, caller, declaration_id)
    declaration = await _locked_reload(session, declaration, DeclarationAction.WITHDRAW)
    withdrawn = await _transition(
        session,
        declaration,
        DeclarationAction.WITHDRAW,
        {},
        actor=actor,
        reason=None,
        now=now,
    )
    return DeclarationView.of(withdrawn)


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
) -> DeclarationView:
    """The issuing body's answer for a live declaration, entered by the operator (CLI)."""
    declaration = await repository.get_declaration_by_id(session, declaration_id)
    if declaration is None:
        raise NotFound(f"No declaration {excerpt(declaration_id)}")
    decided = await decide(
        session, declaration, approve=approve, reason=reason, actor=OPERATOR, now=now
    )
    return DeclarationView.of(decided)


async def pending_declarations(
    session: AsyncSession, environment: Environment | None, limit: int
) -> list[DeclarationView]:
    rows = await repository.list_by_status(
        session,
        DeclarationStatus.SUBMITTED,
        environment,
        limit,
    )
    return [DeclarationView.of(row) for row in rows]


async def blocks_system_deletion(session: AsyncSession, system_id: str) -> bool:
    """True while the system has a submitted or approved declaration.

    Takes the system's lock, so a submit racing the deletion either commits first
    (and blocks it) or waits until the deletion is done.
    """
    await systems_repository.lock(session, system_id)
    return await repository.has_declaration_in(session, system_id, SYSTEM_PINNING_STATUSES)
