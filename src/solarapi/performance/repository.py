"""SQL for measured irradiance. Time keys are epoch seconds; arrays go in and out.

The upsert is one `INSERT … ON CONFLICT … DO UPDATE` executed for many rows, the same SQL on
SQLite and PostgreSQL (both have spoken it since 2018), so nothing here looks at the dialect.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import bindparam, case, literal_column, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.db import DriverQuery
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


# Constants written into the SQL (a DriverQuery passes only the named parameters).
_SOURCE_CODE = case(
    (IrradianceReading.source == literal_column("'sensor'"), literal_column("1")),
    else_=literal_column("2"),
)
_RANGE = (
    select(
        _SOURCE_CODE,
        IrradianceReading.start_s,
        *(getattr(IrradianceReading, column) for column in VALUE_COLUMNS),
    )
    .where(
        IrradianceReading.system_id == bindparam("id"),
        IrradianceReading.start_s >= bindparam("start"),
        IrradianceReading.start_s < bindparam("end"),
    )
    .order_by(IrradianceReading.source, IrradianceReading.start_s)
)
_RANGE_READ = DriverQuery(_RANGE)


async def both_between(
    session: AsyncSession, system_id: str, start_s: int, end_s: int
) -> tuple[IrradianceRows, IrradianceRows]:
    """The `sensor` and the `satellite` rows with start in [start_s, end_s), each in time
    order: one read straight through the driver (a year of a system is ~35,000 rows a
    source; through the ORM's result machinery, or converting each value by its column
    type, that read cost more than the model and the buckets together)."""
    # Numbers only: no type processing needed, so the driver's rows are used as they come.
    rows = await _RANGE_READ.raw(session, {"id": system_id, "start": start_s, "end": end_s})
    width = 2 + len(VALUE_COLUMNS)
    # NULL (None) becomes NaN in a float array; epoch seconds are exact in float64.
    flat = np.array(list(itertools.chain.from_iterable(rows)), dtype=np.float64)
    matrix = flat.reshape(len(rows), width)
    sensor = matrix[:, 0] == 1

    def part(keep: npt.NDArray[np.bool_]) -> IrradianceRows:
        chosen = matrix[keep]
        return IrradianceRows(
            chosen[:, 1].astype(np.int64), *(chosen[:, i] for i in range(2, width))
        )

    return part(sensor), part(~sensor)


@dataclass(frozen=True, slots=True)
class ModelInputs:
    """What the model reads of the stored irradiance, each source in time order (NULL as
    NaN): `sensor` POA with its module and ambient temperatures, `satellite` GHI/DNI/DHI with
    its air temperature."""

    sensor_starts: IntArray
    sensor: FloatArray  # rows × (poa, module temperature, ambient temperature)
    satellite_starts: IntArray
    satellite: FloatArray  # rows × (ghi, dni, dhi, air temperature)


_SOURCE_COLUMNS = {
    "sensor": ("poa_w_m2", "module_temp_c", "ambient_temp_c"),
    "satellite": ("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "ambient_temp_c"),
}
_INPUTS = {
    source: select(
        IrradianceReading.start_s, *(getattr(IrradianceReading, name) for name in columns)
    )
    .where(
        IrradianceReading.system_id == bindparam("id"),
        IrradianceReading.source == literal_column(f"'{source}'"),
        IrradianceReading.start_s >= bindparam("start"),
        IrradianceReading.start_s < bindparam("end"),
    )
    .order_by(IrradianceReading.start_s)
    for source, columns in _SOURCE_COLUMNS.items()
}
_INPUTS_READ = {source: DriverQuery(statement) for source, statement in _INPUTS.items()}


async def model_inputs_between(
    session: AsyncSession, system_id: str, start_s: int, end_s: int
) -> ModelInputs:
    """The columns the model uses of the rows with start in [start_s, end_s): one narrow
    read per source (a year of a system is ~35,000 rows a source, and the read costs about
    in proportion to its cells: the model needs 4 or 5 of the 8 columns of `both_between`)."""
    found: dict[str, tuple[IntArray, FloatArray]] = {}
    params = {"id": system_id, "start": start_s, "end": end_s}
    for source, columns in _SOURCE_COLUMNS.items():
        rows = await _INPUTS_READ[source].raw(session, params)
        width = 1 + len(columns)
        flat = np.array(list(itertools.chain.from_iterable(rows)), dtype=np.float64)
        matrix = flat.reshape(len(rows), width)
        found[source] = (matrix[:, 0].astype(np.int64), matrix[:, 1:])
    return ModelInputs(*found["sensor"], *found["satellite"])


def _nullable(values: FloatArray) -> list[float | None]:
    return [None if value != value else value for value in values.tolist()]
