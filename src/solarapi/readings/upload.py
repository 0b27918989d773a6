"""Uploads of readings: validation of a batch (atomic, index-precise errors), the idempotent
upsert, and the hourly and local-daily rollups kept exact in the same transaction."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Awaitable, Callable, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt
from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from solarapi.errors import ApiError, Conflict, NotFound, ValidationFailed
from solarapi.events.service import prepare_event, record_event
from solarapi.jobs.kinds import alert_evaluation_job, enqueue_alert_evaluation
from solarapi.kit.grid import (
    QUARTER_S,
    EnergySeries,
    FloatArray,
    IntArray,
    Interval,
    aggregate_into,
    bucket_edges,
    ceil_to_grid,
    floor_to_grid,
)
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import (
    TimestampError,
    epoch_seconds,
    epoch_seconds_many,
    format_timestamp,
    parse_timestamp,
    utcnow,
)
from solarapi.models.systems import System, SystemRecord
from solarapi.models.webhooks import EventType
from solarapi.readings import repository
from solarapi.readings.partitions import retention_horizon
from solarapi.readings.store import NewBatch
from solarapi.systems import repository as systems_repository

MAX_UPLOAD = 10_000
# What a system can physically produce in 15 minutes is capacity_kwp × 1000 W × 0.25 h;
# 50 % margin for cold, bright edge-of-cloud moments and for rounding by meters.
WH_PER_KWP_PER_QUARTER = 250.0
PLAUSIBILITY_MARGIN = 1.5


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
    # The span of the upload: the first quarter-hour's start, the last one's end (None where
    # a caller of this result type does not track it).
    start: datetime | None = None
    end: datetime | None = None

    def to_api(self) -> dict[str, int]:
        return {"received": self.received, "inserted": self.inserted, "updated": self.updated}


class ReadingRejected(ValidationFailed):
    """One item of an upload is invalid; `index` is 0-based within the batch. A quarter-hour
    given twice carries its start (`repeated_start`, epoch seconds) and, when the first time
    is in the same batch, that item's index (`repeats`), so a file can name both lines."""

    def __init__(
        self,
        index: int,
        field: str,
        problem: str,
        *,
        repeated_start: int | None = None,
        repeats: int | None = None,
    ) -> None:
        super().__init__(f"readings[{index}].{field}: {problem}")
        self.index = index
        self.field = field
        self.problem = problem
        self.repeated_start = repeated_start
        self.repeats = repeats


# Kept by capacity: the decimal arithmetic was ~7 % of a 4-reading upload's CPU in the API
# (bench/readings/README.md), for a handful of distinct capacities.
@functools.lru_cache(maxsize=4096, typed=True)
def _exact_limit(capacity_kwp: float, per_kwp: Decimal) -> tuple[float, Decimal]:
    """`capacity_kwp × per_kwp` as the decimal the client wrote (the shortest repr of the
    float) and the largest float whose own shortest repr is at most that decimal.

    Compared exactly, not as `capacity × 250 × 1.5` in floats: that is 375.37499999999994
    for 1.001 kWp, so the documented cap of 375.375 Wh was refused "at most 375.375 Wh"
    (741 capacities between 0.001 and 99.999 kWp had the same fault)."""
    exact = Decimal(repr(capacity_kwp)) * per_kwp
    limit = float(exact)
    if Decimal(repr(limit)) > exact:
        limit = math.nextafter(limit, -math.inf)
    return limit, exact


# Per kWp: Wh in a quarter-hour (250 × 1.5) and W at any moment (1000 × 1.5).
_WH_PER_KWP = Decimal(repr(WH_PER_KWP_PER_QUARTER)) * Decimal(repr(PLAUSIBILITY_MARGIN))
_W_PER_KWP = Decimal(1000) * Decimal(repr(PLAUSIBILITY_MARGIN))


def plausible_max_wh(capacity_kwp: float) -> float:
    return _exact_limit(capacity_kwp, _WH_PER_KWP)[0]


def plausible_max_w(capacity_kwp: float) -> float:
    return _exact_limit(capacity_kwp, _W_PER_KWP)[0]


def _decimal_text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if "." in text else f"{text}.0"


_ITEM_FIELDS = frozenset({"timestamp", "energy_wh", "power_w"})


def refuse_duplicate_keys(raw: bytes, payload: dict[str, object]) -> None:
    """orjson keeps the last of a key given twice; a body of (up to) 10,000 items is too
    large for the gateway's second decoding (~0.2 s), so count instead: each key the body
    holds appears in it, quoted, exactly as often as the decoded items hold it (a string
    value spelling a key name counts too: such a body is refused either way)."""
    readings = payload.get("readings")
    if not isinstance(readings, list):
        return
    expected = {"readings": 1}
    # The items that are objects picked once, each key then counted by a C-level pass: a
    # generator per key cost ~2 ms for 10,000 items.
    items = [item for item in readings if isinstance(item, dict)]
    for name in _ITEM_FIELDS:
        expected[name] = sum(map(dict.__contains__, items, itertools.repeat(name)))
    for name, count in expected.items():
        if raw.count(b'"' + name.encode() + b'"') > count:
            raise ValidationFailed(
                f"request body: the key '{name}' is given twice in one object; give each key once"
            )


def batch_from_json(payload: object) -> ReadingBatch:
    """The upload body (already JSON-decoded) → items, checking its shape with located
    messages (`readings[3].energy_wh: must be a number`). Done by hand rather than by a
    pydantic model: validating 10,000 model instances cost more than storing them."""
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object with a 'readings' list")
    for key in payload:
        if key != "readings":
            raise ValidationFailed(f"{excerpt(key)}: unknown field")
    readings = payload.get("readings")
    if readings is None:
        raise ValidationFailed("readings: is required")
    if not isinstance(readings, list):
        raise ValidationFailed("readings: must be a list of readings")
    fast = _batch_at_once(readings)
    if fast is not None:
        return fast
    batch = ReadingBatch()
    timestamps, energies, powers = batch.timestamps, batch.energy_wh, batch.power_w
    for i, item in enumerate(readings):
        if not isinstance(item, dict):
            raise ValidationFailed(f"readings[{i}]: must be an object")
        if not _ITEM_FIELDS.issuperset(item):
            unknown = sorted(set(item) - _ITEM_FIELDS)[0]
            raise ReadingRejected(i, excerpt(unknown), "unknown field")
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


_NUMBERS = frozenset({int, float})


def _batch_at_once(readings: list[object]) -> ReadingBatch | None:
    """`batch_from_json`'s items when every one is well formed, checked over the whole list
    by C-level passes (`map`, sets of types) instead of an `isinstance` chain per item; None
    when any is not, and the item-by-item way finds and names the first."""
    if set(map(type, readings)) != {dict}:
        return None
    items: list[dict[str, object]] = readings  # type: ignore[assignment] # checked above
    if not _ITEM_FIELDS.issuperset(set().union(*items)):
        return None
    timestamps = list(map(dict.get, items, itertools.repeat("timestamp")))
    energies = list(map(dict.get, items, itertools.repeat("energy_wh")))
    powers = list(map(dict.get, items, itertools.repeat("power_w")))
    # bool is not int here: `type(True) is bool`, refused as the item-by-item way refuses it.
    energy_types, power_types = set(map(type, energies)), set(map(type, powers))
    if set(map(type, timestamps)) != {str} or not _NUMBERS.issuperset(energy_types):
        return None
    if not (_NUMBERS | {type(None)}).issuperset(power_types):
        return None
    if int in energy_types:
        energies = [float(value) for value in energies]  # type: ignore[arg-type]
    if int in power_types:
        powers = [None if value is None else float(value) for value in powers]  # type: ignore[arg-type]
    return ReadingBatch(timestamps, energies, powers)  # type: ignore[arg-type] # checked above


@dataclass(frozen=True, slots=True)
class CheckedStarts:
    """A batch's timestamps as epoch seconds, with the rules every quarter-hour upload shares
    (readings, irradiance) as masks over the items before the first unparsable one."""

    starts: IntArray
    checked: int
    unparsable: ReadingRejected | None
    rules: list[tuple[str, npt.NDArray[np.bool_]]]


# From this many items on, timestamps are parsed at once (numpy's fixed cost per operation
# made a 4-item batch slower that way: ~0.7 instead of ~0.2 ms).
_AT_ONCE_FROM = 64


def check_starts(timestamps: list[str], now: datetime) -> CheckedStarts:
    """Parse in index order (an unparsable timestamp bounds the search for earlier faults)
    and mask the items that are not an aligned, ended, unique quarter-hour start."""
    count = len(timestamps)
    unaligned = np.zeros(count, dtype=bool)
    unparsable: ReadingRejected | None = None
    # Nearly every client sends `YYYY-MM-DDTHH:MM:SSZ`: all of them at once when all are so.
    fast = epoch_seconds_many(timestamps) if count >= _AT_ONCE_FROM else None
    starts = np.zeros(count, dtype=np.int64) if fast is None else fast
    midnights: dict[str, int] = {}
    for i, text in enumerate(timestamps if fast is None else ()):
        seconds = epoch_seconds(text, midnights)
        if seconds is None:
            try:
                moment = parse_timestamp(text)
            except TimestampError as exc:
                unparsable = ReadingRejected(i, "timestamp", str(exc))
                break
            seconds = int(moment.timestamp() // 1)
            unaligned[i] = moment.microsecond != 0
        starts[i] = seconds
    checked = unparsable.index if unparsable else count
    span = slice(0, checked)
    _, first_seen = np.unique(starts[span], return_index=True)
    repeated = np.ones(checked, dtype=bool)
    repeated[first_seen] = False
    rules: list[tuple[str, npt.NDArray[np.bool_]]] = [
        ("aligned", unaligned[span] | (starts[span] % QUARTER_S != 0)),
        ("epoch", starts[span] < 0),
        ("ended", starts[span] + QUARTER_S > now.timestamp()),
        ("repeat", repeated),
    ]
    return CheckedStarts(starts, checked, unparsable, rules)


def first_broken(rules: list[tuple[str, npt.NDArray[np.bool_]]], checked: int) -> tuple[int, str]:
    """(index, rule) of the earliest item a rule refuses (rules in their order within one
    item); (`checked`, "") when none does."""
    first_bad, rule = checked, ""
    for name, mask in rules:
        hits = np.flatnonzero(mask)
        if len(hits) and int(hits[0]) < first_bad:
            first_bad, rule = int(hits[0]), name
    return first_bad, rule


def timestamp_rejection(
    timestamps: list[str], index: int, rule: str, starts: IntArray, now: datetime
) -> ReadingRejected | None:
    """The message of a shared timestamp rule (None: `rule` is the caller's own)."""
    moment = format_timestamp(datetime.fromtimestamp(int(starts[index]), UTC))
    if rule == "aligned":
        return ReadingRejected(
            index,
            "timestamp",
            f"'{excerpt(timestamps[index])}' is not the start of a quarter-hour; in UTC the "
            "minute must be 0, 15, 30 or 45 and the seconds 0",
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
            repeated_start=int(starts[index]),
            repeats=earlier,
        )
    if rule == "earlier":
        return ReadingRejected(
            index,
            "timestamp",
            f"{moment} repeats an earlier item; each quarter-hour may appear once",
            repeated_start=int(starts[index]),
        )
    return None


def _validated(
    batch: ReadingBatch, capacity_kwp: float, now: datetime, earlier: IntArray | None = None
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Arrays of a batch in which every item passed; else ReadingRejected naming the first
    bad item (lowest index; for one item, timestamp before energy before power). `earlier`:
    quarter-hour starts that the same upload gave before this batch (a file's earlier
    batches), which the batch must not repeat."""
    count = len(batch)
    energy = np.array(batch.energy_wh, dtype=np.float64)
    power = np.array(batch.power_w, dtype=np.float64)  # None → NaN
    power_given = np.fromiter((p is not None for p in batch.power_w), bool, count=count)
    checked = check_starts(batch.timestamps, now)
    limit = plausible_max_wh(capacity_kwp)
    power_limit = plausible_max_w(capacity_kwp)
    span = slice(0, checked.checked)
    rules = [
        *checked.rules,
        *([] if earlier is None else [("earlier", np.isin(checked.starts[span], earlier))]),
        ("energy", ~np.isfinite(energy[span]) | (energy[span] < 0)),
        ("plausible", energy[span] > limit),
        ("power", power_given[span] & ~(np.isfinite(power[span]) & (power[span] >= 0))),
        ("power_plausible", power_given[span] & (power[span] > power_limit)),
    ]
    first_bad, rule = first_broken(rules, checked.checked)
    if first_bad == checked.checked:
        if checked.unparsable is not None:
            raise checked.unparsable
        return checked.starts, energy, power
    raise timestamp_rejection(batch.timestamps, first_bad, rule, checked.starts, now) or _rejection(
        batch, first_bad, rule, capacity_kwp
    )


def simulated_takes_no_upload(
    system_id: str, whose: str, *, so: str = "", instead: str = "to upload"
) -> Conflict:
    """The 409 of an upload (or what serves only uploads) to a simulated system: its data
    is the sandbox model's (`whose`), never uploaded."""
    return Conflict(
        f"System '{system_id}' is simulated: {whose} and cannot be uploaded{so}; create a "
        f"system with data_source 'metered' {instead}"
    )


def check_size(batch: Sized) -> None:
    """1 to MAX_UPLOAD items, as every quarter-hour upload (readings, irradiance) takes."""
    if not 1 <= len(batch) <= MAX_UPLOAD:
        raise ValidationFailed(f"readings must hold 1 to {MAX_UPLOAD:,} items; got {len(batch):,}")


def _rejection(batch: ReadingBatch, index: int, rule: str, capacity_kwp: float) -> ReadingRejected:
    if rule == "energy":
        return ReadingRejected(index, "energy_wh", f"must be ≥ 0; got {batch.energy_wh[index]}")
    if rule == "plausible":
        exact = _exact_limit(capacity_kwp, _WH_PER_KWP)[1]
        return ReadingRejected(
            index,
            "energy_wh",
            f"{batch.energy_wh[index]} Wh in 15 minutes is implausible for a {capacity_kwp} kWp system "
            f"(at most {_decimal_text(exact)} Wh = capacity_kwp × 250 × 1.5)",
        )
    if rule == "power_plausible":
        exact = _exact_limit(capacity_kwp, _W_PER_KWP)[1]
        return ReadingRejected(
            index,
            "power_w",
            f"{batch.power_w[index]} W is implausible for a {capacity_kwp} kWp system "
            f"(at most {_decimal_text(exact)} W = capacity_kwp × 1000 × 1.5)",
        )
    return ReadingRejected(index, "power_w", f"must be ≥ 0; got {batch.power_w[index]}")


# Systems as an upload last read them, by id, kept without a version: an upload of new
# quarter-hours is one statement that re-checks, under the system's lock, everything the
# batch was checked and bucketed against (owner, capacity, zone, data source), so a kept
# record that is no longer true only sends the upload the general way, after reading the
# system afresh. ~1 KB each.
_KEPT_SYSTEMS: LRUCache[str, SystemRecord] = LRUCache(maxsize=4096)


async def upload_to_system(
    session: AsyncSession,
    system_id: str,
    account_id: str,
    environment: str,
    batch: ReadingBatch,
    now: datetime,
    *,
    read: Callable[[], Awaitable[SystemRecord]],
) -> UploadResult:
    """`upload_readings` to the caller's system `system_id` (of `account_id` and
    `environment`), which `read` reads (or refuses: 404, 401). Where new quarter-hours are
    stored in one statement, it is tried first with the system as this process last read it
    (`_KEPT_SYSTEMS`): a success needs no read; a refusal or any answer but that success is
    given only after reading the system afresh, so a kept record never decides an error."""
    kept = _KEPT_SYSTEMS.get(system_id)
    if (
        kept is not None
        and kept.account_id == account_id
        and kept.environment == environment
        and repository.stores_new_batches(session)
    ):
        with contextlib.suppress(ApiError):
            stored = await _upload(session, kept, batch, now, only_new=True)
            if stored is not None:
                return stored
    try:
        system = await read()
    except NotFound:
        # The contract's order of checks, 400 before 404: a batch that no system would take
        # is refused as such (checked without the system: all but the capacity's bounds).
        check_size(batch)
        _validated(batch, math.inf, now)
        raise
    _KEPT_SYSTEMS[system_id] = system
    return await upload_readings(session, system, batch, now)


async def upload_readings(
    session: AsyncSession,
    system: System | SystemRecord,
    batch: ReadingBatch,
    now: datetime,
    *,
    earlier: IntArray | None = None,
) -> UploadResult:
    """Validate a batch (all or nothing), upsert it and bring the rollups and the system's
    first/last reading up to date, with its event and alert evaluation: in one statement of
    its own when every quarter-hour is new and the database has one (`ReadingStore.store_new`),
    else in the caller's transaction. `system` as read before its lock (a record will do);
    `earlier`: the starts an upload in several batches (a CSV file) gave before this one."""
    result = await _upload(session, system, batch, now, only_new=False, earlier=earlier)
    assert result is not None  # the general way always stores
    return result


async def _upload(
    session: AsyncSession,
    system: System | SystemRecord,
    batch: ReadingBatch,
    now: datetime,
    *,
    only_new: bool,
    earlier: IntArray | None = None,
) -> UploadResult | None:
    """`upload_readings`; `only_new`: None instead of the general way when the one statement
    did not store the batch."""
    check_size(batch)
    # Checked first against the system as read before its lock (a bad batch is refused
    # without queueing for the lock), then again below if the locked row differs.
    starts, energy, power = _validated(batch, system.capacity_kwp, now, earlier)
    horizon = retention_horizon(session, now)
    if horizon is not None and int(starts.min()) < horizon.timestamp():
        index = int(np.flatnonzero(starts < horizon.timestamp())[0])
        raise ReadingRejected(
            index,
            "timestamp",
            f"raw readings before {format_timestamp(horizon)} are not kept "
            "(SOLARAPI_READINGS_RETENTION_MONTHS); upload only later quarter-hours",
        )
    if system.data_source == "simulated":
        raise simulated_takes_no_upload(system.id, "its readings come from the sandbox model")
    lo_s, hi_s = int(starts.min()), int(starts.max()) + QUARTER_S
    first = datetime.fromtimestamp(lo_s, UTC)
    end = datetime.fromtimestamp(hi_s, UTC)
    all_new = UploadResult(len(batch), len(batch), 0, first, end)
    if repository.stores_new_batches(session):
        span = await _stored_new(session, system, starts, energy, power, all_new)
        if span is not None:
            if isinstance(system, System):  # the caller's object shows what was stored
                set_committed_value(system, "first_reading_at", span[0])
                set_committed_value(system, "last_reading_at", span[1])
            return all_new
    if only_new:
        return None
    read_capacity = system.capacity_kwp
    locked = await _locked(session, system.id)
    if locked.capacity_kwp != read_capacity:
        # A PATCH of the capacity committed between the read and the lock.
        starts, energy, power = _validated(batch, locked.capacity_kwp, now, earlier)
    updated = await _store_locked(session, locked, starts, energy, power)
    result = UploadResult(len(batch), len(batch) - updated, updated, first, end)
    await record_event(
        session,
        account_id=locked.account_id,
        environment=locked.environment,
        event_type=EventType.READINGS_UPLOADED,
        data=_event_data(locked.id, result),
    )
    await enqueue_alert_evaluation(session, locked.id)
    return result


async def _stored_new(
    session: AsyncSession,
    system: System | SystemRecord,
    starts: IntArray,
    energy: FloatArray,
    power: FloatArray,
    result: UploadResult,
) -> tuple[datetime, datetime] | None:
    """The batch as new quarter-hours with all an upload writes, in one statement: the
    rollup sums bucketed with the zone as read (the statement checks it under the lock)."""
    assert result.start is not None
    assert result.end is not None
    lo_s, hi_s = int(result.start.timestamp()), int(result.end.timestamp())
    hours, days = _rollup_sums(system.timezone, starts, energy, power, lo_s, hi_s)
    return await repository.store_new(
        session,
        NewBatch(
            system.id, system.account_id, system.environment, system.timezone,
            system.capacity_kwp, starts, energy, power, hours, days, result.start,
            datetime.fromtimestamp(hi_s - QUARTER_S, UTC),
            prepare_event(
                account_id=system.account_id, environment=system.environment,
                event_type=EventType.READINGS_UPLOADED, data=_event_data(system.id, result), now=utcnow(),
            ),
            alert_evaluation_job(system.id),
            system.last_reading_at is None or system.last_reading_at < result.start,
        ),
    )  # fmt: skip


def _event_data(system_id: str, result: UploadResult) -> dict[str, object]:
    assert result.start is not None
    assert result.end is not None
    return {
        "system_id": system_id,
        **result.to_api(),
        "from": format_timestamp(result.start),
        "to": format_timestamp(result.end),
    }


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
    return await _store_locked(
        session, await _locked(session, system.id), starts, energy_wh, power_w
    )


async def _locked(session: AsyncSession, system_id: str) -> System:
    """The system under its lock, as it is now. An upload racing `PATCH timezone` once
    rolled its days up with the zone it had read before the lock, after the PATCH had
    rebuilt them: Amsterdam days stored as Sydney days, for good (failure-modes.md)."""
    system = await systems_repository.lock_fresh(session, system_id)
    if system is None:
        # Deleted between the read and the lock (the deletion holds the same lock).
        raise NotFound(f"No system with id '{excerpt(system_id)}'")
    return system


async def _store_locked(
    session: AsyncSession,
    system: System,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
) -> int:
    existing = await repository.existing_starts(session, system.id, starts)
    await repository.upsert_readings(
        session,
        system.id,
        system.account_id,
        system.environment,
        starts,
        energy_wh,
        power_w,
        all_new=not len(existing),
    )
    lo_s, hi_s = int(starts.min()), int(starts.max()) + QUARTER_S
    if len(existing):
        # Replaced values: recompute the touched rollup rows from the raw readings.
        await refresh_rollups(session, system, lo_s, hi_s)
    else:
        # Only new quarter-hours (the usual case): add the batch's own sums to the rollups,
        # without reading anything back. Exact because the system is locked.
        await _add_to_rollups(session, system, starts, energy_wh, power_w, lo_s, hi_s)
    # In SQL rather than by comparing with `system`'s columns: one statement, and the span
    # stays exact whoever wrote before.
    span = await repository.extend_reading_span(
        session,
        system.id,
        datetime.fromtimestamp(lo_s, UTC),
        datetime.fromtimestamp(hi_s - QUARTER_S, UTC),
    )
    set_committed_value(system, "first_reading_at", span[0])
    set_committed_value(system, "last_reading_at", span[1])
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
    hours, days = _rollup_sums(system.timezone, starts, energy_wh, power_w, lo_s, hi_s)
    await repository.upsert_hours(session, system.id, hours, add=True)
    await repository.upsert_days(session, system.id, days, add=True)


def _rollup_sums(
    timezone: str,
    starts: IntArray,
    energy_wh: FloatArray,
    power_w: FloatArray,
    lo_s: int,
    hi_s: int,
) -> tuple[EnergySeries, EnergySeries]:
    """The hourly and local-daily rollup rows of new quarter-hours alone, to add to the
    stored ones."""
    tz = ZoneInfo(timezone)
    samples = np.ones(len(starts), dtype=np.int64)
    hour_lo, hour_hi = lo_s - lo_s % 3600, hi_s + (-hi_s) % 3600
    hours = aggregate_into(
        np.arange(hour_lo, hour_hi + 1, 3600, dtype=np.int64), starts, energy_wh, samples, power_w
    )
    days = aggregate_into(
        bucket_edges(lo_s, hi_s, Interval.DAY, tz), starts, energy_wh, samples, power_w
    )
    return _present(hours), _present(days)


def _present(buckets: EnergySeries) -> EnergySeries:
    has = buckets.samples > 0
    return EnergySeries(
        buckets.starts[has],
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
