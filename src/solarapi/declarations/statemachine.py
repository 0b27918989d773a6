"""The declaration state machine: one declarative table, used by the service and rendered into
the docs (a test checks that `docs/declarations.md` carries exactly this table).

Any (status, action) pair that is not a row of `TRANSITIONS` is refused with 409 naming the
current status, so adding a state or an action here is all it takes to change the rules —
and the tests, generated from this table, follow.
"""

from __future__ import annotations

from dataclasses import dataclass

from solarapi.models.declarations import DeclarationAction, DeclarationStatus

# The status and the action live with their tables (the columns are typed by them).
__all__ = ["DeclarationAction", "DeclarationStatus"]


@dataclass(frozen=True, slots=True)
class Transition:
    source: DeclarationStatus | None  # None: the declaration does not exist yet
    action: DeclarationAction
    target: DeclarationStatus | None  # None: the declaration is gone
    trigger: str  # how a client or the operator performs the action (for the docs)


_S = DeclarationStatus
_A = DeclarationAction

TRANSITIONS: tuple[Transition, ...] = (
    Transition(None, _A.CREATE, _S.DRAFT, "`POST /declarations` → 201 + `Location`"),
    Transition(
        _S.DRAFT, _A.UPDATE, _S.DRAFT, "`PATCH /declarations/{id}` (energy_wh, period, reference)"
    ),
    Transition(_S.DRAFT, _A.DELETE, None, "`DELETE /declarations/{id}` → 204"),
    Transition(
        _S.DRAFT,
        _A.SUBMIT,
        _S.SUBMITTED,
        "`POST /declarations/{id}/submit` → 200; `coverage` < 0.95 → 409",
    ),
    Transition(_S.SUBMITTED, _A.WITHDRAW, _S.WITHDRAWN, "`POST /declarations/{id}/withdraw` → 200"),
    Transition(
        _S.SUBMITTED,
        _A.APPROVE,
        _S.APPROVED,
        "issuing body: `solarapi declarations decide ID --approve` (live); automatic in the "
        "sandbox when `energy_wh` ≤ `metered_energy_wh`",
    ),
    Transition(
        _S.SUBMITTED,
        _A.REJECT,
        _S.REJECTED,
        "issuing body: `solarapi declarations decide ID --reject --reason TEXT` (live); "
        "automatic in the sandbox when `energy_wh` > `metered_energy_wh`",
    ),
)

# Statuses that still claim their period: a new declaration of the same system and type may
# not overlap one of these.
CLAIMING_STATUSES: frozenset[DeclarationStatus] = frozenset({_S.DRAFT, _S.SUBMITTED, _S.APPROVED})

# Statuses during which the system must not be deleted (its data backs a filed statement).
SYSTEM_PINNING_STATUSES: frozenset[DeclarationStatus] = frozenset({_S.SUBMITTED, _S.APPROVED})

# Actions on an existing declaration (everything but create): the ones a test must try in
# every status.
EXISTING_ACTIONS: tuple[DeclarationAction, ...] = tuple(
    a for a in DeclarationAction if a != _A.CREATE
)

_BY_PAIR: dict[tuple[DeclarationStatus | None, DeclarationAction], Transition] = {
    (t.source, t.action): t for t in TRANSITIONS
}

_VERBS: dict[DeclarationAction, str] = {
    _A.CREATE: "created",
    _A.UPDATE: "changed",
    _A.DELETE: "deleted",
    _A.SUBMIT: "submitted",
    _A.WITHDRAW: "withdrawn",
    _A.APPROVE: "approved",
    _A.REJECT: "rejected",
}


class TransitionNotAllowed(Exception):
    """`action` is not a row of the table for `status`."""

    def __init__(
        self, status: DeclarationStatus, action: DeclarationAction, subject: str = "The declaration"
    ) -> None:
        self.status = status
        self.action = action
        super().__init__(describe_refusal(status, action, subject))


def transition_for(status: DeclarationStatus, action: DeclarationAction) -> Transition:
    """The row allowing `action` in `status`; raises `TransitionNotAllowed` otherwise."""
    found = _BY_PAIR.get((status, action))
    if found is None:
        raise TransitionNotAllowed(status, action)
    return found


def is_allowed(status: DeclarationStatus, action: DeclarationAction) -> bool:
    return (status, action) in _BY_PAIR


def final_statuses() -> frozenset[DeclarationStatus]:
    """Statuses with no way out."""
    sources = {t.source for t in TRANSITIONS}
    return frozenset(s for s in DeclarationStatus if s not in sources)


def describe_refusal(
    status: DeclarationStatus, action: DeclarationAction, subject: str = "The declaration"
) -> str:
    allowed_from = [t.source.value for t in TRANSITIONS if t.action == action and t.source]
    verb = _VERBS[action]
    if status in final_statuses():
        why = f"'{status.value}' is final"
    elif allowed_from:
        why = f"only a declaration in status {' or '.join(repr(s) for s in allowed_from)} can be {verb}"
    else:
        why = f"no declaration can be {verb}"
    return f"{subject} is '{status.value}' and cannot be {verb}: {why}"


def markdown_table() -> str:
    """The table as it appears in `docs/declarations.md` (and the contract)."""
    lines = ["| from | action | how | to |", "|---|---|---|---|"]
    for t in TRANSITIONS:
        source = f"`{t.source.value}`" if t.source else "—"
        target = f"`{t.target.value}`" if t.target else "(gone)"
        lines.append(f"| {source} | `{t.action.value}` | {t.trigger} | {target} |")
    return "\n".join(lines)
