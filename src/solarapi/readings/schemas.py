"""Request and response bodies of the readings endpoints (also the OpenAPI documentation)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from solarapi.readings.upload import MAX_UPLOAD

# Strict: a quoted number or a boolean is a client bug to report, not to coerce.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class ReadingItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timestamp: Annotated[
        str,
        Field(
            strict=True,
            description="Start of the 15-minute interval, RFC 3339 with a zone",
            examples=["2025-06-15T10:15:00Z"],
        ),
    ]
    energy_wh: Annotated[Number, Field(description="≥ 0, at most capacity_kwp × 375")]
    power_w: Annotated[Number | None, Field(description="Optional, ≥ 0")] = None


class UploadResultOut(BaseModel):
    received: int
    inserted: int
    updated: int


class Bucket(BaseModel):
    start: str
    end: str
    energy_wh: float | None
    power_avg_w: float | None
    power_max_w: float | None
    samples: int
    expected_samples: int


class Totals(BaseModel):
    energy_wh: float | None
    power_max_w: float | None
    samples: int
    expected_samples: int


class ReadingsMeta(BaseModel):
    system_id: str
    interval: Literal["15m", "30m", "1h", "1d", "1w", "1M"]
    timezone: str
    from_: Annotated[str, Field(alias="from")]
    to: str
    totals: Totals


class ReadingsOut(BaseModel):
    data: list[Bucket]
    meta: ReadingsMeta


# The body of an upload, documented by hand: the endpoint checks it in one pass of its own
# (`upload.batch_from_json`) instead of through a pydantic model.
UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["readings"],
    "additionalProperties": False,
    "properties": {
        "readings": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_UPLOAD,
            "items": ReadingItem.model_json_schema(),
        }
    },
}
