"""Time series as pandas DataFrames, for users who have pandas (the `pandas` extra)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is optional: only type checkers need it here
    import pandas as pd


def to_dataframe(buckets: Sequence[Any], tz: str | None = None) -> pd.DataFrame:
    """One row per bucket, indexed by the bucket's start as a tz-aware DatetimeIndex (UTC, or
    `tz`); the other fields are columns, missing values NaN (never 0)."""
    try:
        # pandas is optional and costs about a second to import: only when asked for a frame.
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - exercised only without pandas
        raise ImportError("DataFrames need pandas: pip install 'solarapi-client[pandas]'") from exc
    rows = [dataclasses.asdict(bucket) for bucket in buckets]
    columns = [f.name for f in dataclasses.fields(buckets[0])] if buckets else ["start", "end"]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame["start"] = pd.to_datetime(frame["start"], utc=True)
    frame["end"] = pd.to_datetime(frame["end"], utc=True)
    frame = frame.set_index("start")
    if tz is not None:
        frame.index = pd.DatetimeIndex(frame.index).tz_convert(tz)
        frame["end"] = frame["end"].dt.tz_convert(tz)
    for column in frame.columns:
        if column != "end":
            frame[column] = pd.to_numeric(frame[column])
    return frame
