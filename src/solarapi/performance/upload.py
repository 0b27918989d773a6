"""Irradiance uploads (`POST /systems/{id}/irradiance`): the readings upload's rules — 1 to
10,000 items, quarter-hour starts that have ended, unique within the batch, all or nothing
with the first bad item named, idempotent upsert — for plane-of-array irradiance and
temperatures. Imported satellite irradiance (`performance.cams`) is stored here too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import ValidationFailed
from solarapi.kit.grid import FloatArray, IntArray
from solarapi.kit.text import excerpt
from solarapi.models.systems import System
from solarapi.performance import repository
from solarapi.readings.upload import MAX_UPLOAD as MAX_UPLOAD
from solarapi.readings.upload import (
    ReadingRejected,
    UploadResult,
    check_size,
    check_starts,
    first_broken,
    simulated_takes_no_upload,
    timestamp_rejection,
)
from solarapi.systems import repository as systems_repository

MAX_POA_W_M2 = 1500.0
MIN_TEMP_C = -50.0
MAX_TEMP_C = 100.0
_ITEM_FIELDS = frozenset({"timestamp", "poa_w_m2", "module_temp_c", "ambient_temp_c"})
_TEMPERATURES = ("module_temp_c", "ambient_temp_c")


@dataclass(slots=True)
class IrradianceBatch:
    """Uploaded items as parallel columns, before validation (None = not sent)."""

    timestamps: list[str] = field(default_factory=list)
    poa_w_m2: list[float] = field(default_factory=list)
    module_temp_c: list[float | None] = field(default_factory=list)
    ambient_temp_c: list[float | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.timestamps)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def batch_from_json(payload: object) -> IrradianceBatch:
    """The decoded body → items, with located messages (`readings[3].poa_w_m2: …`)."""
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object with a 'readings' list")
    for key in payload:
        if key != "readings":
            raise ValidationFailed(f"{excerpt(key)}: unknown field")
    items = payload.get("readings")
    if items is None:
        raise ValidationFailed("readings: is required")
    if not isinstance(items, list):
        raise ValidationFailed("readings: must be a list of quarter-hours")
    batch = IrradianceBatch()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationFailed(f"readings[{i}]: must be an object")
        if not _ITEM_FIELDS.issuperset(item):
            raise ReadingRejected(i, excerpt(sorted(set(item) - _ITEM_FIELDS)[0]), "unknown field")
        timestamp, poa = item.get("timestamp"), item.get("poa_w_m2")
        if not isinstance(timestamp, str):
            raise ReadingRejected(
                i, "timestamp", "is required" if timestamp is None else "must be a string"
            )
        if not _number(poa):
            raise ReadingRejected(
                i, "poa_w_m2", "is required" if poa is None else "must be a number"
            )
        for name in _TEMPERATURES:
            value = item.get(name)
            if value is not None and not _number(value):
                raise ReadingRejected(i, name, "must be a number or null")
        batch.timestamps.append(timestamp)
        batch.poa_w_m2.append(float(poa))  # type: ignore[arg-type]  # checked just above
        batch.module_temp_c.append(_optional(item.get("module_temp_c")))
        batch.ambient_temp_c.append(_optional(item.get("ambient_temp_c")))
    return batch


def _optional(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]  # a number


@dataclass(frozen=True, slots=True)
class ValidBatch:
    starts: IntArray
    poa_w_m2: FloatArray
    module_temp_c: FloatArray
    ambient_temp_c: FloatArray


def validate(batch: IrradianceBatch, now: datetime) -> ValidBatch:
    """The batch as arrays if every item passes; else ReadingRejected naming the first bad
    item (lowest index; within an item, timestamp before irradiance before temperatures)."""
    check_size(batch)
    checked = check_starts(batch.timestamps, now)
    poa = np.array(batch.poa_w_m2, dtype=np.float64)
    module = np.array(batch.module_temp_c, dtype=np.float64)  # None → NaN
    ambient = np.array(batch.ambient_temp_c, dtype=np.float64)
    span = slice(0, checked.checked)

    def out_of(values: FloatArray, lo: float, hi: float) -> npt.NDArray[np.bool_]:
        # NaN = not sent (JSON has no NaN); an infinity is out of any range.
        result: npt.NDArray[np.bool_] = ~np.isnan(values) & ~((values >= lo) & (values <= hi))
        return result

    rules = [
        *checked.rules,
        ("poa_w_m2", ~np.isfinite(poa[span]) | (poa[span] < 0) | (poa[span] > MAX_POA_W_M2)),
        ("module_temp_c", out_of(module[span], MIN_TEMP_C, MAX_TEMP_C)),
        ("ambient_temp_c", out_of(ambient[span], MIN_TEMP_C, MAX_TEMP_C)),
    ]
    first_bad, rule = first_broken(rules, checked.checked)
    if first_bad == checked.checked:
        if checked.unparsable is not None:
            raise checked.unparsable
        return ValidBatch(checked.starts, poa, module, ambient)
    raise timestamp_rejection(batch.timestamps, first_bad, rule, checked.starts, now) or _rejection(
        batch, first_bad, rule
    )


def _rejection(batch: IrradianceBatch, index: int, rule: str) -> ReadingRejected:
    if rule == "poa_w_m2":
        return ReadingRejected(
            index,
            "poa_w_m2",
            f"must be between 0 and {MAX_POA_W_M2:,.0f} W/m²; got {batch.poa_w_m2[index]}",
        )
    value = getattr(batch, rule)[index]
    return ReadingRejected(
        index, rule, f"must be between {MIN_TEMP_C:.0f} and {MAX_TEMP_C:.0f} °C; got {value}"
    )


async def upload_irradiance(
    session: AsyncSession, system: System, valid: ValidBatch
) -> UploadResult:
    """Upsert a validated batch (`validate`: every rule holds without the system, so the
    caller checks it before reading the system, 400 before 404) as the system's `sensor`
    irradiance."""
    if system.data_source == "simulated":
        raise simulated_takes_no_upload(system.id, "its irradiance is the sandbox model's own")
    updated = await store(
        session,
        system,
        "sensor",
        valid.starts,
        {
            "poa_w_m2": valid.poa_w_m2,
            "module_temp_c": valid.module_temp_c,
            "ambient_temp_c": valid.ambient_temp_c,
        },
    )
    count = len(valid.starts)
    return UploadResult(count, count - updated, updated)


async def store(
    session: AsyncSession,
    system: System,
    source: str,
    starts: IntArray,
    values: dict[str, FloatArray],
) -> int:
    """Upsert validated quarter-hours of `source` under the system's lock (raising its
    `data_version`: what was derived from its data is stale); returns how many already had
    a row."""
    await systems_repository.lock(session, system.id)
    existing = await repository.existing_starts(session, system.id, source, starts)
    await repository.upsert(session, system.id, source, starts, values)
    await systems_repository.raise_data_version(session, system.id)
    return len(existing)
