"""The Idempotency-Key the OpenAPI document describes is the one the API accepts."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from solarapi.idempotency.middleware import MAX_KEY_LENGTH, key_problem
from solarapi.idempotency.openapi import IDEMPOTENCY_PARAMETER

SCHEMA = IDEMPOTENCY_PARAMETER["schema"]
PATTERN = SCHEMA["pattern"]


@given(st.from_regex(PATTERN, fullmatch=True).filter(lambda key: len(key) <= SCHEMA["maxLength"]))
@example("0b5e4c1e-0c52-4a1f-9d0c-2f2d1a0e6b7f")
@example("a b~")
def test_a_key_the_document_allows_is_accepted(key: str) -> None:
    assert key_problem(key) is None


@given(st.text(max_size=MAX_KEY_LENGTH + 5))
@example("\x01")  # a control character: what the fuzz test sent when the document allowed it
@example("é")
@example("")
def test_a_key_the_api_refuses_is_outside_the_document(key: str) -> None:
    if key_problem(key) is not None:
        allowed = SCHEMA["minLength"] <= len(key) <= SCHEMA["maxLength"]
        assert not (allowed and re.fullmatch(PATTERN, key))
