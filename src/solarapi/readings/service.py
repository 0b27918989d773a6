"""Rules of reading readings: the native quarter-hour series of any system (stored or
simulated), aggregation into the bucket grid, the summary and period totals. Uploads and
rollups are in `readings.upload`.

Public API used by other areas (sandbox, market value, declarations, reports, dashboard):
`quarter_hours`, `aggregate`, `summary`, `period_totals`.

The path of a readings request: the router parses `interval`, `from` and `to` into a
`kit.grid.SeriesQuery` (once, `kit.grid.parse_series_query`); `read_readings` widens its
range to the system's grid (once), reads the system and its rows (once, through the
database's `ReadingStore`), sums the rows into the buckets (once, `kit.grid.aggregate_into`,
an `EnergySeries`) and returns a typed `Readings`, which the router renders (once,
`readings.rendering.render`).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Principal
from solarapi.errors import NotFound
from solarapi.kit.grid import (
    QUARTER_S,
    EnergySeries,
    FloatArray,
    IntArray,
    Interval,
    SeriesQuery,
    TimeRange,
    TooManyBuckets,
    aggregate_into,
    aggregate_many,
    hour_aligned,
    local_date,
    local_midnight,
    range_hour_aligned,
    same_as_utc_grid,
    widen_range,
)
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_timestamp
from solarapi.models.systems import ReadableSystem
from solarapi.readings import repository
from solarapi.readings.rendering import ManyReadings, Readings, Totals, totals_of
from solarapi.readings.repository import reading_store
from solarapi.readings.store import DAYS, HOURS, RAW, Series
from solarapi.systems.access import owned
from solarapi.systems.repository import FleetMember, SystemHead, get_record
from solarapi.systems.span import simulated_since

# --- the sandbox data source -----------------------------------------------------------------


async def simulate(system: ReadableSystem, start_s: int, end_s: int) -> EnergySeries | None:
    """The sandbox's physical model of `system` over [start_s, end_s), or None before its
    simulated history starts."""
    if "solarapi.sandbox.model" not in sys.modules:
        # start-up: the model pulls in pvlib, pandas and scipy (seconds to import, measured):
        # imported on the first simulated request, on a worker thread, not on the event loop.
        await asyncio.to_thread(importlib.import_module, "solarapi.sandbox.model")
    from solarapi.sandbox import model  # start-up: loaded just above, so this is a lookup

    # Simulated history starts at the installation day, and never before 2000 (see
    # docs/sandbox.md): a 1M query may span 833 years.
    start_s = max(start_s, simulated_since(system))
    if end_s <= start_s:
        return None
    params = model.PvParams.of(system)
    start, end = datetime.fromtimestamp(start_s, UTC), datetime.fromtimestamp(end_s, UTC)
    if model.is_cached(params, start, end):
        series = model.simulate(params, start, end)
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
    session: AsyncSession, system: ReadableSystem, start: datetime, end: datetime, now: datetime
) -> EnergySeries:
    """The native 15-minute series of [start, end) (UTC, aligned to the quarter-hour) for any
    data source: metered systems from stored readings, simulated ones from the sandbox model.
    One entry per quarter-hour of the range; `energy_wh` NaN (and `samples` 0) where there is
    no reading, `power_max_w` (the reported power) NaN where none was reported. Quarter-hours
    that have not ended by `now` have no reading."""
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
                _place(starts, energy, power, series.starts, series.energy_wh, series.power_max_w)
        else:
            rows = await repository.readings_between(session, system.id, start_s, known_end)
            _place(starts, energy, power, rows.starts, rows.energy_wh, rows.power_max_w)
    return EnergySeries(starts, energy, (~np.isnan(energy)).astype(np.int64), power)


async def quarter_hours_of_many(
    session: AsyncSession,
    systems: Sequence[ReadableSystem],
    ranges: Sequence[tuple[int, int]],
    now: datetime,
) -> list[EnergySeries]:
    """`quarter_hours` of many systems, each over its own range [start_s, end_s) (epoch
    seconds on the quarter-hour grid; the portfolio's market value): the metered systems'
    stored quarter-hours in one statement, placed as `quarter_hours` places each system's
    own (the sandbox model's for simulated systems). System k's equals `quarter_hours` of
    systems[k] over ranges[k]."""
    ended = _ended_before(now)
    metered = [
        k
        for k, system in enumerate(systems)
        if system.data_source != "simulated" and min(ranges[k][1], ended) > ranges[k][0]
    ]
    owners = np.zeros(0, dtype=np.int64)
    rows = RAW.empty()
    if metered:
        lo = min(ranges[k][0] for k in metered)
        hi = max(min(ranges[k][1], ended) for k in metered)
        owners, rows = await reading_store(session).rows_of_many(
            session, RAW, [systems[k].id for k in metered], lo, hi
        )
    cuts = np.searchsorted(owners, np.arange(len(metered) + 1))
    place = {k: i for i, k in enumerate(metered)}
    series: list[EnergySeries] = []
    for k, (system, (start_s, end_s)) in enumerate(zip(systems, ranges, strict=True)):
        if k not in place:
            series.append(await _quarter_hours_s(session, system, start_s, end_s, now))
            continue
        starts = np.arange(start_s, end_s, QUARTER_S, dtype=np.int64)
        energy = np.full(len(starts), np.nan)
        power = np.full(len(starts), np.nan)
        a, b = int(cuts[place[k]]), int(cuts[place[k] + 1])
        at = rows.starts[a:b]
        # The rows `quarter_hours` reads for this system: [start_s, its known end).
        mine = slice(
            a + int(np.searchsorted(at, start_s)),
            a + int(np.searchsorted(at, min(end_s, ended))),
        )
        _place(
            starts, energy, power, rows.starts[mine], rows.energy_wh[mine], rows.power_max_w[mine]
        )
        series.append(EnergySeries(starts, energy, (~np.isnan(energy)).astype(np.int64), power))
    return series


async def _quarter_hours_s(
    session: AsyncSession, system: ReadableSystem, start_s: int, end_s: int, now: datetime
) -> EnergySeries:
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


# --- the readings query ---------------------------------------------------------------------


_UTC = ZoneInfo("UTC")


def _source(time_range: TimeRange) -> Series:
    """The coarsest stored rows that tile the range's buckets exactly: the local-day rollup
    for 1d/1w/1M, the hourly (UTC) rollup for 1h where every edge is a UTC hour (whole-hour
    zones), raw quarter-hours otherwise (15m, 30m, and 1h in Kolkata or Kathmandu)."""
    if time_range.interval.is_calendar:
        return DAYS
    if time_range.interval is Interval.HOUR and range_hour_aligned(time_range):
        return HOURS
    return RAW


async def read_readings(
    session: AsyncSession,
    principal: Principal,
    system_id: str,
    query: SeriesQuery,
    now: datetime,
) -> Readings:
    """`GET /systems/{id}/readings`: the caller's system `system_id` (404 if it is not
    theirs) in the buckets of the query's range widened to its grid (the system's zone).
    Raises ValidationFailed for an empty/reversed range, before the 404; over 10,000
    buckets of the system's own grid, naming its largest `to` (for 15m, 30m and 1h a range
    over the cap on the UTC grid is refused before the 404 when the system is not the
    caller's: `over_cap_on_utc`).

    The grid depends on the system's zone, which comes with the system. The system and the
    rows of a guessed range come together (`ReadingStore.system_and_rows`: one statement, so
    one round trip on PostgreSQL and, for the packed rollups, one read transaction on
    SQLite: the system and its rows of one snapshot), and the rows of the range widened to
    its zone are taken from them, bucketed by the same `_bucketed` as `aggregate` (what
    reports, declarations and the dashboard call). For 15m, 30m and 1h the guess is the UTC
    grid's range, the system's own in whole-hour zones; for calendar intervals the local days around the range as asked
    that any zone's calendar could widen it to. A zone whose grid falls outside the guess
    (1h off the UTC hour) reads again."""
    store = reading_store(session)
    if query.interval.is_calendar:
        # Widened for the zone only once it is known (after the 404 check, as the endpoint
        # always answered); the rollup of local days serves every calendar interval.
        margin = _CALENDAR_MARGIN_S[query.interval]
        guess_source = DAYS
        guess_start = int(query.start.timestamp()) - margin
        guess_end = int(query.end.timestamp()) + 1 + margin
    else:
        try:
            guess = query.widen(_UTC)
        except TooManyBuckets as refused:
            return await _read_on_own_grid(session, principal, system_id, query, now, refused)
        guess_source = _source(guess)
        guess_start, guess_end = guess.start_s, guess.end_s
    found, rows = await store.system_and_rows(
        session, guess_source, system_id, guess_start, guess_end
    )
    system = owned(found, principal, system_id)
    tz = ZoneInfo(system.timezone)
    if not query.interval.is_calendar and same_as_utc_grid(
        query.start, query.end, query.interval, tz
    ):
        # A whole-hour zone: its grid is the UTC grid, widened already.
        time_range = TimeRange(guess.start_s, guess.end_s, guess.interval, tz, guess.utc_grid)
        source = guess_source
    else:
        time_range = query.widen(tz)
        source = _source(time_range)
    start_s, end_s = time_range.start_s, time_range.end_s
    if system.data_source == "simulated":
        return await _simulated_readings(session, system, time_range, now)
    if source is not guess_source or start_s < guess_start or end_s > guess_end:
        rows = await store.rows(session, source, system_id, start_s, end_s)
    elif (start_s, end_s) != (guess_start, guess_end):
        rows = _within(rows, start_s, end_s)
    return _bucketed(system, time_range, rows)


async def _read_on_own_grid(
    session: AsyncSession,
    principal: Principal,
    system_id: str,
    query: SeriesQuery,
    now: datetime,
    refused: TooManyBuckets,
) -> Readings:
    """`read_readings` of a 15m, 30m or 1h range over the cap on the UTC grid: the system's
    own grid decides — it refuses naming its own largest `to`, or (a zone off the UTC hour,
    where every edge moves) holds the range within the cap. The UTC grid's refusal stands
    when the system is not the caller's (400 before 404)."""
    store = reading_store(session)
    try:
        system = owned(await store.system_head(session, system_id), principal, system_id)
    except NotFound:
        raise refused from None
    time_range = query.widen(ZoneInfo(system.timezone))
    if system.data_source == "simulated":
        return await _simulated_readings(session, system, time_range, now)
    rows = await store.rows(
        session, _source(time_range), system_id, time_range.start_s, time_range.end_s
    )
    return _bucketed(system, time_range, rows)


def over_cap_on_utc(query: SeriesQuery) -> TooManyBuckets | None:
    """The range checked before any system is read (400 before 404): each refusal raised
    but one over the bucket cap, which is returned — whether a range is over the cap is
    each system's grid's to say (`time_ranges_by_zone`); the UTC grid's refusal stands only
    when no system of the caller's is there to say it."""
    try:
        query.widen(_UTC)
    except TooManyBuckets as refused:
        return refused
    return None


def time_ranges_by_zone(
    timezones: Iterable[str],
    query: SeriesQuery,
    refused_on_utc: TooManyBuckets | None = None,
) -> dict[str, TimeRange]:
    """`query` widened on each zone's grid (once per zone: systems of one zone share the
    range and its buckets). Over the cap on any, the refusal that names the smallest largest
    `to` — which fits every zone, so following it is enough. `refused_on_utc`
    (`over_cap_on_utc`) is raised when there is no zone at all to decide."""
    ranges: dict[str, TimeRange] = {}
    refusals: list[TooManyBuckets] = []
    for timezone in sorted(set(timezones)):  # (sorted: the same refusal on a tie)
        try:
            ranges[timezone] = query.widen(ZoneInfo(timezone))
        except TooManyBuckets as refused:
            refusals.append(refused)
    if refusals:
        raise TooManyBuckets.tightest(refusals)
    if not ranges and refused_on_utc is not None:
        raise refused_on_utc
    return ranges


async def _simulated_readings(
    session: AsyncSession, head: SystemHead, time_range: TimeRange, now: datetime
) -> Readings:
    """A simulated system's readings: the sandbox model needs the whole record."""
    system = await get_record(session, head.id)
    if system is None:  # deleted between the two reads
        raise NotFound(f"No system with id '{excerpt(head.id)}'")
    return _bucketed(system, time_range, await _simulated_rows(system, time_range, now))


# How far a calendar interval's range widened to a zone's calendar can reach beyond the
# range as asked: less than its longest bucket (a local day of 25 h at a summer-time change),
# with an hour to spare.
_CALENDAR_MARGIN_S = {
    Interval.DAY: 26 * 3_600,
    Interval.WEEK: 7 * 86_400 + 2 * 3_600,
    Interval.MONTH: 31 * 86_400 + 2 * 3_600,
}


def _within(rows: EnergySeries, start_s: int, end_s: int) -> EnergySeries:
    """The rows (in time order) that start in [start_s, end_s): those `rows` reads for it."""
    lo, hi = rows.starts.searchsorted((start_s, end_s)).tolist()  # (no Python wrapper)
    return EnergySeries(
        rows.starts[lo:hi], rows.energy_wh[lo:hi], rows.samples[lo:hi], rows.power_max_w[lo:hi]
    )


def time_range_of(
    system: ReadableSystem | FleetMember, start: datetime, end: datetime, interval: Interval
) -> TimeRange:
    """[start, end) widened to `system`'s grid for `interval` (its local clock and calendar),
    as `read_readings` widens it (ValidationFailed over 10,000 buckets)."""
    return widen_range(start, end, interval, ZoneInfo(system.timezone))


async def readings_of_many(
    session: AsyncSession,
    systems: Sequence[FleetMember],
    time_ranges: Sequence[TimeRange],
    now: datetime,
) -> ManyReadings:
    """`aggregate` for many systems at once (the portfolio): each system's rows of its
    widened range, from the source `read_readings` would read (`_source`), in one statement
    per source for all the metered systems (the sandbox model's for simulated ones), summed
    into every system's buckets by one `aggregate_many`. System k's part equals
    `aggregate` of system k over `time_ranges[k]`: the same rows, in the same order, summed by
    the same function."""
    store = reading_store(session)
    # The metered systems per source, in their order; each range object's source looked up
    # once (systems of one zone share theirs): by identity, as a dataclass's hash is Python
    # code (~1 µs a system).
    by_source: dict[int, tuple[Series, list[int], list[TimeRange]]] = {}
    of_range: dict[int, list[int]] = {}  # per range object, its source's systems
    simulated: list[int] = []
    for k, (system, time_range) in enumerate(zip(systems, time_ranges, strict=True)):
        if system.data_source == "simulated":
            simulated.append(k)
            continue
        members = of_range.get(id(time_range))
        if members is None:
            series = _source(time_range)
            entry = by_source.get(id(series))
            if entry is None:
                entry = by_source[id(series)] = (series, [], [])
            entry[2].append(time_range)
            members = of_range[id(time_range)] = entry[1]
        members.append(k)
    ids = [system.id for system in systems]
    owners: list[IntArray] = []
    parts: list[EnergySeries] = []
    for series, members, ranges in by_source.values():
        lo = min(time_range.start_s for time_range in ranges)
        hi = max(time_range.end_s for time_range in ranges)
        found, rows = await store.rows_of_many(session, series, [ids[k] for k in members], lo, hi)
        owners.append(np.asarray(members, dtype=np.int64)[found])
        parts.append(rows)
    for k in simulated:
        record = await get_record(session, systems[k].id)
        rows = RAW.empty() if record is None else await _simulated_rows(record, time_ranges[k], now)
        owners.append(np.full(len(rows.starts), k, dtype=np.int64))
        parts.append(rows)
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    every = parts or [RAW.empty()]
    starts = np.concatenate([rows.starts for rows in every])
    energy = np.concatenate([rows.energy_wh for rows in every])
    samples = np.concatenate([rows.samples for rows in every])
    power = np.concatenate([rows.power_max_w for rows in every])
    if len(by_source) + len(simulated) > 1:
        # Several reads: in (system, time) order again; stable, so each system's rows keep
        # the time order they were read in.
        order = np.argsort(owner, kind="stable")
        owner, starts, energy, samples, power = (
            owner[order], starts[order], energy[order], samples[order], power[order]
        )  # fmt: skip
    # Systems of one zone share a range object (and so one edges array, which
    # `aggregate_many` lays out once): by identity, as a dataclass's hash is Python code.
    edges: dict[int, IntArray] = {}
    for time_range in time_ranges:
        if id(time_range) not in edges:
            edges[id(time_range)] = time_range.edges()
    buckets = aggregate_many(
        [edges[id(time_range)] for time_range in time_ranges],
        owner,
        starts,
        energy,
        samples,
        power,
    )
    return ManyReadings(
        tuple(ids), tuple([system.timezone for system in systems]), tuple(time_ranges), buckets
    )


async def aggregate(
    session: AsyncSession,
    system: ReadableSystem,
    start: datetime,
    end: datetime,
    interval: Interval,
    now: datetime,
    *,
    timezone: str | None = None,
) -> Readings:
    """The readings of a system already in hand (reports, declarations, the dashboard, and
    `read_readings` for calendar intervals): the endpoint's range, rows and buckets.
    `timezone`: bucket on another zone's clock and calendar instead of the system's own (a
    report's chosen calendar); each bucket then holds the system's readings of that bucket's
    UTC span."""
    tz = ZoneInfo(timezone or system.timezone)
    time_range = widen_range(start, end, interval, tz)
    if system.data_source == "simulated":
        rows = await _simulated_rows(system, time_range, now)
    else:
        source = _source(time_range) if tz.key == system.timezone else _foreign_source(time_range)
        rows = await reading_store(session).rows(
            session, source, system.id, time_range.start_s, time_range.end_s
        )
    return _bucketed(system, time_range, rows)


def _foreign_source(time_range: TimeRange) -> Series:
    """`_source` for buckets on a zone other than the system's: its local-day rollup follows
    the system's midnights, so only the hourly (UTC) rollup, where every edge is a UTC hour,
    or the raw quarter-hours tile the buckets."""
    return HOURS if hour_aligned(time_range.edges()) else RAW


async def _simulated_rows(
    system: ReadableSystem, time_range: TimeRange, now: datetime
) -> EnergySeries:
    """The sandbox model's quarter-hours of the range that have ended by `now`."""
    series = await simulate(system, time_range.start_s, min(time_range.end_s, _ended_before(now)))
    if series is None:
        return RAW.empty()
    known = ~np.isnan(series.energy_wh)
    return RAW.rows([series.starts[known], series.energy_wh[known], series.power_max_w[known]])


def _bucketed(
    system: ReadableSystem | SystemHead, time_range: TimeRange, rows: EnergySeries
) -> Readings:
    buckets = aggregate_into(
        time_range.edges(), rows.starts, rows.energy_wh, rows.samples, rows.power_max_w
    )
    return Readings(
        system.id, system.timezone, time_range, buckets, system.data_source == "simulated"
    )


# --- summary -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """`GET /systems/{id}/summary`: today, this month, this year (the system's local
    calendar) and lifetime energy (None: no reading), with the latest reading's power; the
    numbers rounded to 3 decimals, as a readings body has them."""

    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    last_power_w: float | None
    last_reading_at: str | None

    def to_api(self) -> dict[str, Any]:
        return {
            "energy_today_wh": self.energy_today_wh,
            "energy_month_wh": self.energy_month_wh,
            "energy_year_wh": self.energy_year_wh,
            "energy_lifetime_wh": self.energy_lifetime_wh,
            "last_power_w": self.last_power_w,
            "last_reading_at": self.last_reading_at,
        }


@dataclass(frozen=True, slots=True)
class _Periods:
    """Where a summary's periods start on a time zone's calendar at `now`."""

    today_s: int
    tomorrow_s: int
    month_s: int
    year_s: int


def _periods(timezone: str, now: datetime) -> _Periods:
    tz = ZoneInfo(timezone)
    today = local_date(int(now.timestamp()), tz)
    return _Periods(
        today_s=local_midnight(today, tz),
        tomorrow_s=local_midnight(today + timedelta(days=1), tz),
        month_s=local_midnight(today.replace(day=1), tz),
        year_s=local_midnight(date(today.year, 1, 1), tz),
    )


def _energy(values: FloatArray, samples: IntArray) -> float | None:
    return round(float(values.sum()), 3) if int(samples.sum()) > 0 else None


async def summary(session: AsyncSession, system: ReadableSystem, now: datetime) -> Summary:
    """`GET /systems/{id}/summary` of a system in hand."""
    periods = _periods(system.timezone, now)
    if system.data_source == "simulated":
        return await _simulated_summary(session, system, now, periods)
    days = await repository.days_between(session, system.id, periods.year_s, periods.tomorrow_s)
    lifetime = await repository.days_between(session, system.id, 0, 2**62)
    last = system.last_reading_at
    latest = await repository.latest_reading(
        session, system.id, None if last is None else int(last.timestamp())
    )
    return _metered_summary(periods, days, lifetime, latest)


async def summaries_of_many(
    session: AsyncSession, systems: Sequence[ReadableSystem], now: datetime
) -> list[Summary]:
    """`summary` of many systems at once (the portfolio, the dashboard's fleet totals): every
    metered system's local-day rollup rows in one statement and their latest readings in
    another, each system's summed by the function `summary` sums its own with (the sandbox
    model's summary for simulated ones). System k's equals `summary(systems[k])`."""
    metered = [k for k, system in enumerate(systems) if system.data_source != "simulated"]
    found: list[Summary | None] = [None] * len(systems)
    if metered:
        ids = [systems[k].id for k in metered]
        owners, rows = await reading_store(session).rows_of_many(session, DAYS, ids, 0, 2**62)
        bounds: list[int | None] = []
        for k in metered:
            last = systems[k].last_reading_at
            bounds.append(None if last is None else int(last.timestamp()))
        latest = await repository.latest_readings(session, ids, bounds)
        cuts = np.searchsorted(owners, np.arange(len(metered) + 1))
        periods: dict[str, _Periods] = {}  # systems of one zone share their calendar
        for place, k in enumerate(metered):
            zone = systems[k].timezone
            if zone not in periods:
                periods[zone] = _periods(zone, now)
            lo, hi = int(cuts[place]), int(cuts[place + 1])
            lifetime = EnergySeries(
                rows.starts[lo:hi], rows.energy_wh[lo:hi], rows.samples[lo:hi],
                rows.power_max_w[lo:hi],
            )  # fmt: skip
            year = (lifetime.starts >= periods[zone].year_s) & (
                lifetime.starts < periods[zone].tomorrow_s
            )
            days = EnergySeries(
                lifetime.starts[year], lifetime.energy_wh[year], lifetime.samples[year],
                lifetime.power_max_w[year],
            )  # fmt: skip
            found[k] = _metered_summary(periods[zone], days, lifetime, latest[place])
    summaries: list[Summary] = []
    for system, one in zip(systems, found, strict=True):
        summaries.append(one if one is not None else await summary(session, system, now))
    return summaries


def _metered_summary(
    periods: _Periods,
    days: EnergySeries,
    lifetime: EnergySeries,
    latest: tuple[int, float | None] | None,
) -> Summary:
    """A metered system's summary from its local-day rows of this year (`days`, up to
    tomorrow), of all time (`lifetime`) and its latest reading (start, power)."""

    def within(start: int) -> float | None:
        keep = days.starts >= start
        return _energy(days.energy_wh[keep], days.samples[keep])

    return Summary(
        energy_today_wh=within(periods.today_s),
        energy_month_wh=within(periods.month_s),
        energy_year_wh=within(periods.year_s),
        energy_lifetime_wh=_energy(lifetime.energy_wh, lifetime.samples),
        last_power_w=None if latest is None or latest[1] is None else round(latest[1], 3),
        last_reading_at=(
            None if latest is None else format_timestamp(datetime.fromtimestamp(latest[0], UTC))
        ),
    )


async def _simulated_summary(
    session: AsyncSession, system: ReadableSystem, now: datetime, periods: _Periods
) -> Summary:
    tz = ZoneInfo(system.timezone)
    today_s, month_s, year_s = periods.today_s, periods.month_s, periods.year_s
    # A simulated system "produces" from its installation (or creation) day on.
    installed = system.installed_on or local_date(int(system.created_at.timestamp()), tz)
    # Nothing is simulated before 2000 (`simulated_since`); year 1 east of UTC has no instant.
    installed = max(installed, date(1999, 12, 31))
    life_s = min(local_midnight(installed, tz), year_s)
    end_s = _ended_before(now)
    if end_s <= life_s:
        series = RAW.empty()
    else:
        series = await _quarter_hours_s(session, system, life_s, end_s, now)
    known = ~np.isnan(series.energy_wh)

    def within(start: int) -> float | None:
        keep = known & (series.starts >= start)
        return round(float(series.energy_wh[keep].sum()), 3) if keep.any() else None

    last_at = series.starts[known][-1] if known.any() else None
    last_power = series.power_max_w[known][-1] if known.any() else np.nan
    return Summary(
        energy_today_wh=within(today_s),
        energy_month_wh=within(month_s),
        energy_year_wh=within(year_s),
        energy_lifetime_wh=within(life_s),
        last_power_w=None if np.isnan(last_power) else round(float(last_power), 3),
        last_reading_at=(
            None if last_at is None else format_timestamp(datetime.fromtimestamp(int(last_at), UTC))
        ),
    )


# --- period totals -----------------------------------------------------------------------------


async def period_totals(
    session: AsyncSession, system: ReadableSystem, start_s: int, end_s: int, now: datetime
) -> Totals:
    """Totals over a quarter-hour-aligned range (e.g. a declaration period of whole local
    days), from the same series the readings endpoint aggregates, summed as it sums them."""
    series = await _quarter_hours_s(session, system, start_s, end_s, now)
    return totals_of(series, len(series))
