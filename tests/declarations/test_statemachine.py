"""The state machine table itself, and the docs' copy of it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from solarapi.declarations.schemas import DeclarationOut, TransitionOut, TypeName
from solarapi.declarations.statemachine import (
    CLAIMING_STATUSES,
    EXISTING_ACTIONS,
    TRANSITIONS,
    DeclarationAction,
    DeclarationStatus,
    TransitionNotAllowed,
    final_statuses,
    is_allowed,
    markdown_table,
    transition_for,
)
from solarapi.models.declarations import DeclarationType

DOCS = Path(__file__).resolve().parents[2] / "docs" / "declarations.md"


def test_docs_table_is_the_table_the_service_applies() -> None:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(r"<!-- transitions:begin -->\n(.*?)\n<!-- transitions:end -->", text, re.S)
    assert match is not None, "docs/declarations.md lost its transitions markers"
    assert match.group(1).strip() == markdown_table()


def test_every_status_is_reachable_from_creation() -> None:
    reached = {DeclarationStatus.DRAFT}
    changed = True
    while changed:
        changed = False
        for t in TRANSITIONS:
            if t.source in reached and t.target is not None and t.target not in reached:
                reached.add(t.target)
                changed = True
    assert reached == set(DeclarationStatus)


def test_the_contracts_final_statuses() -> None:
    assert final_statuses() == {
        DeclarationStatus.APPROVED,
        DeclarationStatus.REJECTED,
        DeclarationStatus.WITHDRAWN,
    }
    assert {
        DeclarationStatus.DRAFT,
        DeclarationStatus.SUBMITTED,
        DeclarationStatus.APPROVED,
    } == CLAIMING_STATUSES


def test_no_pair_has_two_rows() -> None:
    pairs = [(t.source, t.action) for t in TRANSITIONS]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize(
    ("status", "action"),
    [(s, a) for s in DeclarationStatus for a in EXISTING_ACTIONS],
    ids=lambda v: str(v),
)
def test_transition_for_follows_the_table(
    status: DeclarationStatus, action: DeclarationAction
) -> None:
    rows = [t for t in TRANSITIONS if t.source == status and t.action == action]
    if rows:
        assert is_allowed(status, action)
        assert transition_for(status, action) == rows[0]
    else:
        assert not is_allowed(status, action)
        with pytest.raises(TransitionNotAllowed) as refused:
            transition_for(status, action)
        # The refusal names the current status, as the 409 must.
        assert f"'{status.value}'" in str(refused.value)


def test_documented_names_are_the_enums_members() -> None:
    """The response schemas spell the values out as `Literal`s (an enum would be an OpenAPI
    component of its own): they must be exactly the members the columns store."""
    assert get_args(TypeName) == tuple(member.value for member in DeclarationType)
    assert get_args(DeclarationOut.model_fields["status"].annotation) == tuple(
        member.value for member in DeclarationStatus
    )
    assert get_args(TransitionOut.model_fields["action"].annotation) == tuple(
        member.value for member in DeclarationAction
    )
