"""Response bodies of the change feed (the OpenAPI documentation)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ChangeRow(BaseModel):
    system_id: str
    timestamp: str = Field(description="Start of the quarter-hour, RFC 3339 UTC")
    energy_wh: float
    power_w: float | None


class ChangesOut(BaseModel):
    data: list[ChangeRow]
    next_cursor: str = Field(description="Opaque; pass it as `cursor` to continue")
    has_more: bool = Field(
        description="Changes after `next_cursor` are already committed: ask again at once"
    )
