"""Rules of readings: the native quarter-hour series of any system, aggregation into the
bucket grid, uploads (validation, idempotent upsert, rollups) and the summary.

Public API used by other areas (sandbox, market value, declarations, reports, dashboard):
`quarter_hours`, `aggregate`, `summary`, `upload_readings`.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.errors import Conflict, ValidationFailed
from solarapi.events.service import record_event
from solarapi.kit.grid import (
    QUARTER_S,
    Buckets,
    FloatArray,
    IntArray,
    Interval,
    aggregate_into,
    bucket_edges,
    ceil_to_grid,
    floor_to_grid,
    iso_strings,
    local_date,
    local_midnight,
    widen_range,
)
from solarapi.kit.timefmt import TimestampError, format_timestamp, parse_timestamp
from solarapi.models.systems import System
from solarapi.readings import repository
from solarapi.readings.repository import Rows

MAX_UPLOAD = 10_000
# What a system can physically produce in 15 minutes is capacity_kwp × 1000 W × 0.25 h;
# 50 % margin for cold, bright edge-of-cloud moments and for rounding by meters.
WH_PER_KWP_PER_QUARTER = 250.0
PLAUSIBILITY_MARGIN = 1.5


@dataclass(frozen=True, slots=True)
class QuarterHours:
    """The native 15-minute series of [start, end): one entry per quarter-hour of the range.
    `energy_wh` NaN = no reading; `power_w` NaN = not reported. Quarter-hours that have not
    ended by `now` are always NaN."""

    starts: IntArray
    energy_wh: FloatArray
    power_w: FloatArray


# --- the sandbox data source -----------------------------------------------------------------


class _SimulatedSeries(Protocol):
    starts: IntArray
    energy_wh: FloatArray
    power_w: FloatArray


async def simulate(system: System, start_s: int, end_s: int) -> _SimulatedSeries | None:
    """The sandbox's physical model, when its module is installed (imported lazily: it pulls
    in pvlib, and the metered path must not depend on it)."""
    model: Any = sys.modules.get("solarapi.sandbox.model")
    if model is None:
        try:
            # The first import takes seconds (pvlib, pandas, scipy): not on the event loop.
            model = await asyncio.to_thread(importlib.import_module, "solarapi.sandbox.model")
        except ImportError:
            return None
    # Simulated history is bounded (see docs/sandbox.md): a 1M query may span 833 years.
    start_s = max(start_s, model.SIMULATION_START_S)
    if end_s <= start_s:
        return None
    params = model.PvParams(
        system_id=system.id,
        latitude=system.latitude,
        longitude=system.longitude,
        timezone=system.timezone,
        capacity_kwp=system.capacity_kwp,
        inverter_capacity_kw=system.inverter_capacity_kw,
        tilt_deg=system.tilt_deg,
        azimuth_deg=system.azimuth_deg,
    )
    start, end = datetime.fromtimestamp(start_s, UTC), datetime.fromtimestamp(end_s, UTC)
    if model.is_cached(params, start, end):
        series: _SimulatedSeries = model.simulate(params, start, end)
    else:
        # CPU-bound while the model's cache is cold (~0.2 s per system-year): off the event
        # loop, so other requests are served meanwhile.
        series = await asyncio.to_thread(model.simulate, params, start, end)
    return series


def _ended_before(now: datetime) -> int:
    """End of the last whole quarter-hour before `now`."""
    now_s = int(now.timestamp() // 1)
    return now_s - now_s % QUARTER_S


async def quarter_hours(
    session: AsyncSession, system: System, start: datetime, end: datetime, now: datetime
) -> QuarterHours:
    """The native 15-minute series of [start, end) (UTC, aligned to the quarter-hour) for any
    data source: metered systems from stored readings, simulated ones from the sandbox model."""
    start_s, end_s = int(start.timestamp()), int(end.timestamp())
    if start_s % QUARTER_S or end_s % QUARTER_S or start_s > end_s:
        raise ValueError("quarter_hours needs a range aligned to 15 minutes")
    starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
    energy = np.full(len(starts), np.nan)
    power = np.full(len(starts), np.nan)
    known_end = min(end_s, _ended_before(now))
    if known_end > start_s:
        if system.data_source == "simulated":
            series = await simulate(system, start_s, known_end)
            if series is not None:
                _place(starts, energy, power, series.starts, series.energy_wh, series.power_w)
        else:
            rows = await repository.readings_between(session, system.id, start_s, known_end)
            _place(starts, energy, power, rows.starts, rows.energy_wh, rows.power_max_w)
    return QuarterHours(starts, energy, power)


async def _quarter_hours_s(
    session: AsyncSession, system: System, start_s: int, end_s: int, now: datetime
) -> QuarterHours:
    """`quarter_hours` for a range given in epoch seconds."""
    return await quarter_hours(
        session,
        system,
        datetime.fromtimestamp(start_s, UTC),
        datetime.fromtimestamp(end_s, UTC),
        now,
    )


def _place(
    grid: IntArray,
    energy: FloatArray,
    power: FloatArray,
    at: IntArray,
    energy_values: FloatArray,
    power_values: FloatArray,
) -> None:
    if len(grid) == 0 or len(at) == 0:
        return
    index = (np.asarray(at, dtype=np.int64) - grid[0]) // QUARTER_S
    inside = (index >= 0) & (index < len(grid))
    energy[index[inside]] = np.asarray(energy_values, dtype=np.float64)[inside]
    power[index[inside]] = np.asarray(power_values, dtype=np.float64)[inside]


# --- aggregation -------------------------------------------------------------------------------


async def _source_rows(
    session: AsyncSession,
    system: System,
    interval: Interval,
    start_s: int,
    end_s: int,
    now: datetime,
) -> Rows:
    """The finest stored rows that tile the requested buckets exactly: raw quarter-hours for
    15m/30m, the hourly rollup for 1h, the local-day rollup for 1d/1w/1M."""
    if system.data_source == "simulated":
        series = await _quarter_hours_s(session, system, start_s, end_s, now)
        known = ~np.isnan(series.energy_wh)
        return Rows(
            series.starts[known],
            series.energy_wh[known],
            np.ones(int(known.sum()), dtype=np.int64),
            series.power_w[known],
        )
    if interval is Interval.HOUR:
        return await repository.hours_between(session, system.id, start_s, end_s)
    if interval.is_calendar:
        return await repository.days_between(session, system.id, start_s, end_s)
    return await repository.readings_between(session, system.id, start_s, end_s)


def _rounded(values: FloatArray) -> list[float | None]:
    return [None if value != value else value for value in np.round(values, 3).tolist()]


async def aggregate(
    session: AsyncSession,
    system: System,
    start: datetime,
    end: datetime,
    interval: Interval,
    now: datetime,
) -> dict[str, Any]:
    """The body of `GET /systems/{id}/readings` (`data` + `meta`) for [start, end) widened to
    the grid. Raises ValidationFailed for an empty/reversed range or over 10,000 buckets."""
    tz = ZoneInfo(system.timezone)
    time_range = widen_range(start, end, interval, tz)
    edges = time_range.edges()
    rows = await _source_rows(session, system, interval, time_range.start_s, time_range.end_s, now)
    buckets = aggregate_into(edges, rows.starts, rows.energy_wh, rows.samples, rows.power_max_w)
    return _body(system, interval, buckets)


def _body(system: System, interval: Interval, buckets: Buckets) -> dict[str, Any]:
    edges = buckets.edges
    lengths = np.diff(edges)
    labels = iso_strings(edges)
    energy = _rounded(buckets.energy_wh)
    power_avg = _rounded(buckets.energy_wh / (lengths / 3600.0))
    power_max = _rounded(buckets.power_max_w)
    samples = buckets.samples.tolist()
    expected = (lengths // QUARTER_S).tolist()
    data = [
        {
            "start": labels[i],
            "end": labels[i + 1],
            "energy_wh": energy[i],
            "power_avg_w": power_avg[i],
            "power_max_w": power_max[i],
            "samples": samples[i],
            "expected_samples": expected[i],
        }
        for i in range(len(samples))
    ]
    total_samples = int(buckets.samples.sum())
    reported = buckets.power_max_w[~np.isnan(buckets.power_max_w)]
    totals = {
        "energy_wh": (round(float(np.nansum(buckets.energy_wh)), 3) if total_samples else None),
        "power_max_w": round(float(reported.max()), 3) if len(reported) else None,
        "samples": total_samples,
        "expected_samples": int(sum(expected)),
    }
    return {
        "data": data,
        "meta": {
            "system_id": system.id,
            "interval": interval.value,
            "timezone": system.timezone,
            "from": labels[0],
            "to": labels[-1],
            "totals": totals,
        },
    }


# --- uploads -----------------------------------------------------------------------------------


@dataclass(slots=True)
class ReadingBatch:
    """Uploaded readings as received (JSON or CSV), before validation, as parallel columns:
    item i is (timestamps[i], energy_wh[i], power_w[i]); power None = not reported."""

    timestamps: list[str] = field(default_factory=list)
    energy_wh: list[float] = field(default_factory=list)
    power_w: list[float | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.timestamps)

    def add(self, timestamp: str, energy_wh: float, power_w: float | None = None) -> None:
        self.timestamps.append(timestamp)
        self.energy_wh.append(energy_wh)
        self.power_w.append(power_w)


@dataclass(frozen=True, slots=True)
class UploadResult:
    received: int
    inserted: int
    updated: int

    def to_api(self) -> dict[str, int]:
        return {"received": self.received, "inserted": self.inserted, "updated": self.updated}


class ReadingRejected(ValidationFailed):
    """One item of an upload is invalid; `index` is 0-based within the batch."""

    def __init__(self, index: int, field: str, problem: str) -> None:
        super().__init__(f"readings[{index}].{field}: {problem}")
        self.index = index
        self.field = field
        self.problem = problem


def plausible_max_wh(capacity_kwp: float) -> float:
    return capacity_kwp * WH_PER_KWP_PER_QUARTER * PLAUSIBILITY_MARGIN


_FAST_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_ITEM_FIELDS = frozenset({"timestamp", "energy_wh", "power_w"})


def _epoch_seconds(text: str, midnights: dict[str, int]) -> int | None:
    """Epoch seconds of `YYYY-MM-DDTHH:MM:SSZ` (the form nearly every client sends) without
    building a datetime per item; None for any other form, which takes the full parser."""
    if len(text) != 20 or _FAST_TIMESTAMP.fullmatch(text) is None:
        return None
    midnight = midnights.get(text[:10])
    if midnight is None:
        try:
            day = date.fromisoformat(text[:10])
        except ValueError:
            return None
        midnight = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
        midnights[text[:10]] = midnight
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if hour > 23 or minute > 59 or second > 59:
        return None
    return midnight + hour * 3600 + minute * 60 + second


def batch_from_json(payload: object) -> ReadingBatch:
    """The upload body (already JSON-decoded) → items, checking its shape with located
    messages (`readings[3].energy_wh: must be a number`). Done by hand rather than by a
    pydantic model: validating 10,000 model instances cost more than storing them."""
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object with a 'readings' list")
    for key in payload:
        if key != "readings":
            raise ValidationFailed(f"{key}: unknown field")
    readings = payload.get("readings")
    if readings is None:
        raise ValidationFailed("readings: is required")
    if not isinstance(readings, list):
        raise ValidationFailed("readings: must be a list of readings")
    batch = ReadingBatch()
    timestamps, energies, powers = batch.timestamps, batch.energy_wh, batch.power_w
    for i, item in enumerate(readings):
        if not isinstance(item, dict):
            raise ValidationFailed(f"readings[{i}]: must be an object")
        if not _ITEM_FIELDS.issuperset(item):
            unknown = sorted(set(item) - _ITEM_FIELDS)[0]
            raise ReadingRejected(i, unknown, "unknown field")
        timestamp = item.get("timestamp")
        energy_wh = item.get("energy_wh")
        power_w = item.get("power_w")
        if not isinstance(timestamp, str):
            problem = "is required" if timestamp is None else "must be a string"
            raise ReadingRejected(i, "timestamp", problem)
        if not isinstance(energy_wh, int | float) or isinstance(energy_wh, bool):
            problem = "is required" if energy_wh is None else "must be a number"
            raise ReadingRejected(i, "energy_wh", problem)
        if power_w is not None and (
            not isinstance(power_w, int | float) or isinstance(power_w, bool)
        ):
            raise ReadingRejected(i, "power_w", "must be a number or null")
        timestamps.append(timestamp)
        energies.append(float(energy_wh))
        powers.append(None if power_w is None else float(power_w))
    return batch


def _validated(
    batch: ReadingBatch, capacity_kwp: float, now: datetime
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Arrays of a batch in which every item passed; else ReadingRejected naming the first
    bad item (lowest index; for one item, timestamp before energy before power)."""
    count = len(batch)
    starts = np.zeros(count, dtype=np.int64)
    unaligned = np.zeros(count, dtype=bool)
    energy = np.array(batch.energy_wh, dtype=np.float64)
    power = np.array(batch.power_w, dtype=np.float64)  # None → NaN
    power_given = np.fromiter((p is not None for p in batch.power_w), bool, count=count)
    # Timestamps: parse in index order; an unparsable one bounds the search for earlier faults.
    midnights: dict[str, int] = {}
    unparsable: ReadingRejected | None = None
    for i, text in enumerate(batch.timestamps):
        seconds = _epoch_seconds(text, midnights)
        if seconds is None:
            try:
                moment = parse_timestamp(text)
            except TimestampError as exc:
                unparsable = ReadingRejected(i, "timestamp", str(exc))
                break
            seconds = int(moment.timestamp() // 1)
            unaligned[i] = moment.microsecond != 0
        starts[i] = seconds
    limit = plausible_max_wh(capacity_kwp)
    now_s = now.timestamp()
    checked = unparsable.index if unparsable else count
    span = slice(0, checked)
    _, first_seen = np.unique(starts[span], return_index=True)
    repeated = np.ones(checked, dtype=bool)
    repeated[first_seen] = False
    # (rule order within one item, mask); the first True of the earliest index wins.
    rules: list[tuple[str, npt.NDArray[np.bool_]]] = [
        ("aligned", unaligned[span] | (starts[span] % QUARTER_S != 0)),
        ("epoch", starts[span] < 0),
        ("ended", starts[span] + QUARTER_S > now_s),
        ("repeat", repeated),
        ("energy", ~np.isfinite(energy[span]) | (energy[span] < 0)),
        ("plausible", energy[span] > limit),
        ("power", power_given[span] & ~(np.isfinite(power[span]) & (power[span] >= 0))),
    ]
    first_bad = checked
    rule = ""
    for name, mask in rules:
        hits = np.flatnonzero(mask)
        if len(hits) and int(hits[0]) < first_bad:
            first_bad, rule = int(hits[0]), name
    if first_bad == checked:
        if unparsable is not None:
            raise unparsable
        return starts, energy, power
    raise _rejection(batch, first_bad, rule, starts, limit, capacity_kwp, now)


def _rejection(
    batch: ReadingBatch,
    index: int,
    rule: str,
    starts: IntArray,
    limit: float,
    capacity_kwp: float,
    now: datetime,
) -> ReadingRejected:
    moment = format_timestamp(datetime.fromtimestamp(int(starts[index]), UTC))
    if rule == "aligned":
        return ReadingRejected(
            index,
            "timestamp",
            f"'{batch.timestamps[index]}' is not the start of a quarter-hour; in UTC the minute must be "
            "0, 15, 30 or 45 and the seconds 0",
        )
    if rule == "epoch":
        return ReadingRejected(index, "timestamp", "must not be before 1970-01-01T00:00:00Z")
    if rule == "ended":
        return ReadingRejected(
            index,
            "timestamp",
            f"the quarter-hour starting {moment} has not ended yet "
            f"(now is {format_timestamp(now)})",
        )
    if rule == "repeat":
        earlier = int(np.flatnonzero(starts[:index] == starts[index])[0])
        return ReadingRejected(
            index,
            "timestamp",
            f"{moment} repeats readings[{earlier}].timestamp; each quarter-hour may appear "
            "once per batch",
        )
    if rule == "energy":
        return ReadingRejected(index, "energy_wh", f"must be ≥ 0; got {batch.energy_wh[index]}")
    if rule == "plausible":
        return ReadingRejected(
            index,
            "energy_wh",
            f"{batch.energy_wh[index]} Wh in 15 minutes is implausible for a {capacity_kwp} kWp system "
            f"(at most {round(limit, 3)} Wh = capacity_kwp × 250 × 1.5)",
        )
    return ReadingRejected(index, "power_w", f"must be ≥ 0; got {batch.power_w[index]}")


async def upload_readings(
    session: AsyncSession, system: System, batch: ReadingBatch, now: datetime
) -> UploadResult:
    """Validate a batch (all or nothing), upsert it and bring the rollups and the system's
    first/last reading up to date, in the caller's transaction."""
    if not 1 <= len(batch) <= MAX_UPLOAD:
        raise ValidationFailed(f"readings must hold 1 to {MAX_UPLOAD:,} items; got {len(batch):,}")
    starts, energy, power = _validated(batch, system.capacity_kwp, now)
    if system.data_source == "simulated":
        raise Conflict(
            f"System '{system.id}' is simulated: its readings come from the sandbox model and "
            "cannot be uploaded; create a system with data_source 'metered' to upload"
        )
    updated = await store_series(session, system, starts, energy, power)
    lo_s, hi_s = int(starts.min()), int(starts.max()) + QUARTER_S
    result = UploadResult(len(batch), len(batch) - updated, updated)
    await record_event(
        session,
        account_id=system.account_id,
        environment=system.environment,
        event_type="readings.uploaded",
        data={
            "system_id": system.id,
            **result.to_api(),
            "from": format_timestamp(datetime.fromtimestamp(lo_s, UTC)),
            "to": format_timestamp(datetime.fromtimestamp(hi_s, UTC)),
        },
    )
    return result


async def store_series(
    session: AsyncSession,
    system: System,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
) -> int:
    """Upsert already-validated quarter-hours (unique, aligned, plausible), refresh the rollups
    and the system's first/last reading; returns how many timestamps already had a reading.
    `upload_readings` validates before calling it; demo data and benchmarks call it directly."""
    if len(starts) == 0:
        return 0
    await repository.lock_system(session, system.id)
    existing = await repository.existing_starts(session, system.id, starts)
    await repository.upsert_readings(session, system.id, starts, energy_wh, power_w)
    lo_s, hi_s = int(starts.min()), int(starts.max()) + QUARTER_S
    if len(existing):
        # Replaced values: recompute the touched rollup rows from the raw readings.
        await refresh_rollups(session, system, lo_s, hi_s)
    else:
        # Only new quarter-hours (the usual case): add the batch's own sums to the rollups,
        # without reading anything back. Exact because the system is locked.
        await _add_to_rollups(session, system, starts, energy_wh, power_w, lo_s, hi_s)
    first = datetime.fromtimestamp(lo_s, UTC)
    last = datetime.fromtimestamp(hi_s - QUARTER_S, UTC)
    if system.first_reading_at is None or first < system.first_reading_at:
        system.first_reading_at = first
    if system.last_reading_at is None or last > system.last_reading_at:
        system.last_reading_at = last
    await session.flush()
    return len(existing)


# --- rollups -----------------------------------------------------------------------------------


async def refresh_rollups(session: AsyncSession, system: System, lo_s: int, hi_s: int) -> None:
    """Recompute, from the raw readings, every hourly and local-daily rollup row touching
    [lo_s, hi_s). Recomputing (rather than adding deltas) keeps replaced readings exact."""
    tz = ZoneInfo(system.timezone)
    day_lo = floor_to_grid(lo_s, Interval.DAY, tz)
    day_hi = ceil_to_grid(hi_s, Interval.DAY, tz)
    hour_lo = lo_s - lo_s % 3600
    hour_hi = hi_s + (-hi_s) % 3600
    # Half-hour zones (Adelaide, Kolkata) put local midnight mid-hour: read enough raw rows
    # to cover both whole days and whole hours.
    rows = await repository.readings_between(
        session, system.id, min(day_lo, hour_lo), max(day_hi, hour_hi)
    )
    hours = aggregate_into(
        np.arange(hour_lo, hour_hi + 1, 3600, dtype=np.int64),
        rows.starts,
        rows.energy_wh,
        rows.samples,
        rows.power_max_w,
    )
    await repository.upsert_hours(session, system.id, _present(hours))
    days = aggregate_into(
        bucket_edges(day_lo, day_hi, Interval.DAY, tz),
        rows.starts,
        rows.energy_wh,
        rows.samples,
        rows.power_max_w,
    )
    await repository.upsert_days(session, system.id, _present(days))


async def _add_to_rollups(
    session: AsyncSession,
    system: System,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
    lo_s: int,
    hi_s: int,
) -> None:
    tz = ZoneInfo(system.timezone)
    samples = np.ones(len(starts), dtype=np.int64)
    hour_lo, hour_hi = lo_s - lo_s % 3600, hi_s + (-hi_s) % 3600
    hours = aggregate_into(
        np.arange(hour_lo, hour_hi + 1, 3600, dtype=np.int64), starts, energy_wh, samples, power_w
    )
    await repository.upsert_hours(session, system.id, _present(hours), add=True)
    days = aggregate_into(
        bucket_edges(lo_s, hi_s, Interval.DAY, tz), starts, energy_wh, samples, power_w
    )
    await repository.upsert_days(session, system.id, _present(days), add=True)


def _present(buckets: Buckets) -> Rows:
    has = buckets.samples > 0
    return Rows(
        buckets.edges[:-1][has],
        buckets.energy_wh[has],
        buckets.samples[has],
        buckets.power_max_w[has],
    )


async def rebuild_daily_rollup(session: AsyncSession, system: System) -> None:
    """Rebuild the local-day rollup after the system's time zone changed."""
    await repository.delete_days(session, system.id)
    span = await repository.reading_span(session, system.id)
    if span is None:
        return
    year_s = 366 * 86400
    for lo in range(span[0], span[1] + QUARTER_S, year_s):
        await refresh_rollups(session, system, lo, min(lo + year_s, span[1] + QUARTER_S))


# --- summary -----------------------------------------------------------------------------------


def _energy(values: FloatArray, samples: IntArray) -> float | None:
    return round(float(values.sum()), 3) if int(samples.sum()) > 0 else None


async def summary(session: AsyncSession, system: System, now: datetime) -> dict[str, Any]:
    """`GET /systems/{id}/summary`: today, this month, this year (the system's local calendar)
    and lifetime energy, with the latest reading's power."""
    tz = ZoneInfo(system.timezone)
    now_s = int(now.timestamp())
    today = local_date(now_s, tz)
    today_s = local_midnight(today, tz)
    tomorrow_s = local_midnight(today + timedelta(days=1), tz)
    month_s = local_midnight(today.replace(day=1), tz)
    year_s = local_midnight(date(today.year, 1, 1), tz)
    if system.data_source == "simulated":
        return await _simulated_summary(session, system, now, tz, today_s, month_s, year_s)
    days = await repository.days_between(session, system.id, year_s, tomorrow_s)
    lifetime = await repository.days_between(session, system.id, 0, 2**62)
    latest = await repository.latest_reading(session, system.id)

    def within(start: int) -> float | None:
        keep = days.starts >= start
        return _energy(days.energy_wh[keep], days.samples[keep])

    return {
        "energy_today_wh": within(today_s),
        "energy_month_wh": within(month_s),
        "energy_year_wh": within(year_s),
        "energy_lifetime_wh": _energy(lifetime.energy_wh, lifetime.samples),
        "last_power_w": None if latest is None else latest[1],
        "last_reading_at": (
            None if latest is None else format_timestamp(datetime.fromtimestamp(latest[0], UTC))
        ),
    }


async def _simulated_summary(
    session: AsyncSession,
    system: System,
    now: datetime,
    tz: ZoneInfo,
    today_s: int,
    month_s: int,
    year_s: int,
) -> dict[str, Any]:
    # A simulated system "produces" from its installation (or creation) day on.
    installed = system.installed_on or local_date(int(system.created_at.timestamp()), tz)
    life_s = min(local_midnight(installed, tz), year_s)
    end_s = _ended_before(now)
    if end_s <= life_s:
        series = QuarterHours(np.empty(0, np.int64), np.empty(0), np.empty(0))
    else:
        series = await _quarter_hours_s(session, system, life_s, end_s, now)
    known = ~np.isnan(series.energy_wh)

    def within(start: int) -> float | None:
        keep = known & (series.starts >= start)
        return round(float(series.energy_wh[keep].sum()), 3) if keep.any() else None

    last_at = series.starts[known][-1] if known.any() else None
    last_power = series.power_w[known][-1] if known.any() else np.nan
    return {
        "energy_today_wh": within(today_s),
        "energy_month_wh": within(month_s),
        "energy_year_wh": within(year_s),
        "energy_lifetime_wh": within(life_s),
        "last_power_w": None if np.isnan(last_power) else float(last_power),
        "last_reading_at": (
            None if last_at is None else format_timestamp(datetime.fromtimestamp(int(last_at), UTC))
        ),
    }


# --- period totals -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeriodTotals:
    """Energy of [start_s, end_s): `energy_wh` None when no quarter-hour has a reading."""

    energy_wh: float | None
    samples: int
    expected_samples: int


async def period_totals(
    session: AsyncSession, system: System, start_s: int, end_s: int, now: datetime
) -> PeriodTotals:
    """Totals over a quarter-hour-aligned range (e.g. a declaration period of whole local
    days), from the same series the readings endpoint aggregates."""
    series = await _quarter_hours_s(session, system, start_s, end_s, now)
    known = ~np.isnan(series.energy_wh)
    samples = int(known.sum())
    energy = round(float(series.energy_wh[known].sum()), 3) if samples else None
    return PeriodTotals(energy, samples, len(series.starts))
