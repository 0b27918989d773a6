"""Fleet reads: the portfolio endpoints' and the change feed's models.

The portfolio is paged over systems; `client.portfolio.*` follows the pages and returns one
object for the whole fleet (`meta` from the first page: its totals cover every matching
system anyway). `to_dataframe()` indexes rows by (system_id, start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import httpx

from solarapi_client._decode import decode
from solarapi_client.errors import SolarApiError
from solarapi_client.models import (
    Interval,
    Pagination,
    PriceSource,
    ReadingBucket,
    ReadingTotals,
    Summary,
    TraderFigures,
    ValueBucket,
    ValueTotals,
)
from solarapi_client.ranges import NOMINAL_S, as_datetime

if TYPE_CHECKING:  # pandas is optional: only type checkers need it here
    import pandas as pd

    # At run time `__getattr__` below finds them (the clients import this module).
    from solarapi_client._async import AsyncChangeFeed as AsyncChangeFeed
    from solarapi_client._sync import ChangeFeed as ChangeFeed


Timestamp = datetime | str
MAX_FLEET_PAGE = 1_000
MAX_CHANGES_PAGE = 10_000


# --- models ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemReadings:
    system_id: str
    timezone: str
    from_: datetime
    to: datetime
    data: list[ReadingBucket]
    totals: ReadingTotals


@dataclass(frozen=True)
class FleetReadingsTotals:
    energy_wh: float | None
    samples: int
    expected_samples: int
    systems: int
    systems_with_data: int


@dataclass(frozen=True)
class FleetReadingsMeta:
    interval: Interval
    from_: datetime
    to: datetime
    totals: FleetReadingsTotals


@dataclass(frozen=True)
class FleetReadings:
    data: list[SystemReadings]
    meta: FleetReadingsMeta

    def to_dataframe(self) -> pd.DataFrame:
        """One row per system and bucket, indexed by (system_id, start) (UTC)."""
        return _frame([(item.system_id, item.data) for item in self.data], ReadingBucket)


@dataclass(frozen=True)
class SystemSummary(Summary):
    system_id: str = ""


@dataclass(frozen=True)
class FleetSummaryTotals:
    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    capacity_kwp: float
    systems: int
    systems_reporting_today: int
    specific_yield_today_kwh_kwp: float | None


@dataclass(frozen=True)
class FleetSummaryMeta:
    totals: FleetSummaryTotals


@dataclass(frozen=True)
class FleetSummary:
    data: list[SystemSummary]
    meta: FleetSummaryMeta

    def to_dataframe(self) -> pd.DataFrame:
        """One row per system, indexed by system_id."""
        pandas = _pandas()
        frame = pandas.DataFrame.from_records([dataclasses.asdict(item) for item in self.data])
        return cast("pd.DataFrame", frame.set_index("system_id") if len(frame) else frame)


@dataclass(frozen=True)
class SystemValue:
    system_id: str
    market_zone: str | None
    timezone: str
    from_: datetime
    to: datetime
    currency: str | None
    source: PriceSource | None
    data: list[ValueBucket]
    totals: ValueTotals


@dataclass(frozen=True)
class ZoneValueTotals(TraderFigures):
    """The trader's figures of a bidding zone's systems, or of the whole fleet."""

    systems: int = 0


@dataclass(frozen=True)
class ZoneValue(ZoneValueTotals):
    zone: str = ""


@dataclass(frozen=True)
class FleetValueMeta:
    interval: Interval
    from_: datetime
    to: datetime
    currency: str
    zones: list[ZoneValue]
    totals: ZoneValueTotals


@dataclass(frozen=True)
class FleetValue:
    data: list[SystemValue]
    meta: FleetValueMeta

    def to_dataframe(self) -> pd.DataFrame:
        """One row per system and bucket, indexed by (system_id, start) (UTC)."""
        return _frame([(item.system_id, item.data) for item in self.data], ValueBucket)


@dataclass(frozen=True)
class Change:
    """One quarter-hour reading inserted or replaced: apply it over any earlier one for the
    same (system_id, timestamp)."""

    system_id: str
    timestamp: datetime
    energy_wh: float
    power_w: float | None


@dataclass(frozen=True)
class ChangePage:
    data: list[Change]
    next_cursor: str
    has_more: bool


# --- pages ----------------------------------------------------------------------------------

P = TypeVar("P")


@dataclass(frozen=True)
class FleetPage(Generic[P]):
    body: P
    pagination: Pagination


def fleet_page(cls: type[P]) -> Callable[[httpx.Response], FleetPage[P]]:
    def parse(response: httpx.Response) -> FleetPage[P]:
        body = response.json()
        return FleetPage(decode(cls, body), decode(Pagination, body["pagination"]))

    return parse


# A portfolio page holds at most this many buckets (its systems × each one's buckets); the
# server refuses a larger page, naming the largest `limit` that fits.
MAX_PAGE_BUCKETS = 100_000


def fitting_page(
    page_size: int, start: Timestamp | None, end: Timestamp | None, interval: str | None
) -> int:
    """`page_size`, or fewer systems a page when a long range at a fine interval would put
    more than MAX_PAGE_BUCKETS buckets on it: a system's buckets counted generously (the
    interval's `ranges.NOMINAL_S`, and three more for the range widened to each system's
    local grid and its clock's changes), so the page is never refused for its size. Without
    both ends of the range the server's defaults decide, and `page_size` is sent as it is."""
    if start is None or end is None:
        return page_size
    try:
        seconds = (as_datetime(end, "end") - as_datetime(start, "start")).total_seconds()
    except (ValueError, SolarApiError):
        return page_size  # the server says what is wrong with it
    step = NOMINAL_S.get(interval or "1d")
    if step is None or seconds <= 0:
        return page_size
    buckets = -(-int(seconds) // step) + 3
    return max(1, min(page_size, MAX_PAGE_BUCKETS // buckets))


def merge(first: Any, more: Any) -> Any:
    return dataclasses.replace(first, data=[*first.data, *more.data])


def __getattr__(name: str) -> Any:
    """`fleet.ChangeFeed` and `fleet.AsyncChangeFeed`, the iterators `readings.changes()`
    returns: they live with the clients, which import this module."""
    if name == "ChangeFeed":
        from solarapi_client._sync import ChangeFeed

        return ChangeFeed
    if name == "AsyncChangeFeed":
        from solarapi_client._async import AsyncChangeFeed

        return AsyncChangeFeed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- frames ---------------------------------------------------------------------------------


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - exercised only without pandas
        raise ImportError("DataFrames need pandas: pip install 'solarapi-client[pandas]'") from exc
    return pd


def _frame(series: list[tuple[str, list[Any]]], bucket: type) -> pd.DataFrame:
    pandas = _pandas()
    columns = ["system_id", *(f.name for f in dataclasses.fields(bucket))]
    rows = [
        {"system_id": system_id, **dataclasses.asdict(item)}
        for system_id, items in series
        for item in items
    ]
    frame = pandas.DataFrame.from_records(rows, columns=columns)
    frame["start"] = pandas.to_datetime(frame["start"], utc=True)
    frame["end"] = pandas.to_datetime(frame["end"], utc=True)
    for column in columns[3:]:
        frame[column] = pandas.to_numeric(frame[column])
    return cast("pd.DataFrame", frame.set_index(["system_id", "start"]))
