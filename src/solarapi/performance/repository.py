"""SQL for measured irradiance. Time keys are epoch seconds; arrays go in and out.

The upsert is one `INSERT … ON CONFLICT … DO UPDATE` executed for many rows, the same SQL on
SQLite and PostgreSQL (both have spoken it since 2018), so nothing here looks at the dialect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.kit.grid import FloatArray, IntArray
from solarapi.models.irradiance import IrradianceReading

VALUE_COLUMNS = (
    "poa_w_m2",
    "ghi_w_m2",
    "dni_w_m2",
    "dhi_w_m2",
    "module_temp_c",
    "ambient_temp_c",
)

_UPSERT = text(
    "INSERT INTO irradiance (system_id, source, start_s, "  # noqa: S608 - constants only
    + ", ".join(VALUE_COLUMNS)
    + ") VALUES (:system_id, :source, :start_s, "
    + ", ".join(f":{column}" for column in VALUE_COLUMNS)
    + ") ON CONFLICT (system_id, source, start_s) DO UPDATE SET "
    + ", ".join(f"{column} = excluded.{column}" for column in VALUE_COLUMNS)
)


@dataclass(frozen=True, slots=True)
class IrradianceRows:
    """Stored quarter-hours of one source, in time order (NULL as NaN)."""

    starts: IntArray
    poa_w_m2: FloatArray
    ghi_w_m2: FloatArray
    dni_w_m2: FloatArray
    dhi_w_m2: FloatArray
    module_temp_c: FloatArray
    ambient_temp_c: FloatArray

    def __len__(self) -> int:
        return len(self.starts)


async def existing_starts(
    session: AsyncSession, system_id: str, source: str, starts: IntArray
) -> IntArray:
    """Which of `starts` already hold a row of `source`."""
    if len(starts) == 0:
        return np.empty(0, dtype=np.int64)
    result = await session.execute(
        select(IrradianceReading.start_s).where(
            IrradianceReading.system_id == system_id,
            IrradianceReading.source == source,
            IrradianceReading.start_s >= int(starts.min()),
            IrradianceReading.start_s <= int(starts.max()),
        )
    )
    stored = np.fromiter(result.scalars(), dtype=np.int64)
    return starts[np.isin(starts, stored)]


async def upsert(
    session: AsyncSession,
    system_id: str,
    source: str,
    starts: IntArray,
    values: dict[str, FloatArray],
) -> None:
    """Insert or replace rows of `source`; `values` maps columns of VALUE_COLUMNS to arrays
    (NaN = NULL); a column not given is NULL."""
    if len(starts) == 0:
        return
    columns = {
        column: _nullable(values[column]) if column in values else [None] * len(starts)
        for column in VALUE_COLUMNS
    }
    rows = [
        {"system_id": system_id, "source": source, "start_s": start}
        | {column: columns[column][i] for column in VALUE_COLUMNS}
        for i, start in enumerate(starts.tolist())
    ]
    await session.execute(_UPSERT, rows)


async def rows_between(
    session: AsyncSession, system_id: str, source: str, start_s: int, end_s: int
) -> IrradianceRows:
    """Rows of `source` with start in [start_s, end_s), in time order."""
    result = await session.execute(
        select(
            IrradianceReading.start_s,
            *(getattr(IrradianceReading, column) for column in VALUE_COLUMNS),
        )
        .where(
            IrradianceReading.system_id == system_id,
            IrradianceReading.source == source,
            IrradianceReading.start_s >= start_s,
            IrradianceReading.start_s < end_s,
        )
        .order_by(IrradianceReading.start_s)
    )
    rows = result.all()
    starts = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    columns = [
        np.array([np.nan if row[i] is None else row[i] for row in rows], dtype=np.float64)
        for i in range(1, len(VALUE_COLUMNS) + 1)
    ]
    return IrradianceRows(starts, *columns)


def _nullable(values: FloatArray) -> list[float | None]:
    return [None if value != value else value for value in values.tolist()]
