"""The systems' enums and the names the API documents for them."""

from __future__ import annotations

from typing import get_args

from solarapi.models.systems import SYSTEM_STATUSES, DataSource, SystemStatus
from solarapi.systems import schemas


def test_documented_names_are_the_enums_members() -> None:
    """The schemas spell the values out as `Literal`s (an enum would be an OpenAPI component
    of its own): they must be exactly the members the columns store, in the same order."""
    assert get_args(schemas.Status) == tuple(member.value for member in SystemStatus)
    assert get_args(schemas.DataSource) == tuple(member.value for member in DataSource)
    assert SYSTEM_STATUSES == ("active", "inactive", "decommissioned")
