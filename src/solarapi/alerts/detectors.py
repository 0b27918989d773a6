"""The alert rules as pure functions over a system's stored quarter-hours and the sun.

Each rule answers a `Finding`: the rule holds (an alert should be open), is clear (an open
alert resolves), or cannot tell from the data (nothing changes) — with the numbers that
decided it. Nothing here reads a database or a clock: the service and the evaluation bench
(bench/alerts) call the same functions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from solarapi.alerts.sky import (
    PROCESS_SKY,
    QUARTER_S,
    FloatArray,
    IntArray,
    Site,
    SkyCache,
    SunGrid,
)
from solarapi.models.alerts import AlertType

# The contract's thresholds (api-v1 section 13).
DAYLIGHT_ELEVATION_DEG = 5.0  # "daylight" for the offline rule
ZERO_ELEVATION_DEG = 15.0  # the sun high enough that a working system cannot make 0 Wh
ZERO_RUN = 4  # consecutive quarter-hours at 0 Wh
WINDOW_DAYS = 7  # the underperformance window
MIN_COVERAGE = 0.95

# The clear-sky envelope method (no measured irradiance). Clouds only ever lower a quarter-
# hour's ratio to the clear-sky energy, and nearly every week has a few clear moments; a
# fault lowers every moment. So a day's best quarter-hour ratio (under a sun above 15° and
# in front of the panel) shows the system's clear-sky performance, and the index compares
# the best of the last 7 days with the system's own normal: the upper quartile of the day
# maxima of the 30 days before (a high quantile, not the maximum, so that one bright day of
# cloud enhancement does not set the bar). Without that history (a new system) the normal
# is the clear-sky model itself (ratio 1.0). While an alert is open its baseline is kept
# (frozen in its evidence), so a long fault never becomes the system's new normal.
BASELINE_DAYS = 30
RATIO_ELEVATION_DEG = 15.0
RATIO_MAX_AOI_DEG = 75.0
ENVELOPE_MIN_QUARTERS = 8  # a day with fewer rated quarter-hours has no envelope
BASELINE_QUANTILE = 0.75
BASELINE_MIN_DAYS = 10
HISTORY_DAYS = WINDOW_DAYS + BASELINE_DAYS + 1  # what `evaluate` needs (plus today)


class Verdict(enum.StrEnum):
    HOLDS = "holds"  # open an alert (or keep it open)
    CLEAR = "clear"  # resolve an open alert
    UNKNOWN = "unknown"  # the data cannot tell: change nothing


Evidence = Mapping[str, float | int | str | None]


@dataclass(frozen=True, slots=True)
class Finding:
    type: AlertType
    verdict: Verdict
    evidence: Evidence = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Settings:
    offline_after_hours: float = 4.0
    underperformance_threshold: float = 0.8


@dataclass(frozen=True, slots=True)
class Observations:
    """A system's stored quarter-hours in the evaluated window (ascending starts), and the
    start of its last stored quarter-hour ever (None: it never reported)."""

    starts: IntArray
    energy_wh: FloatArray
    last_reading_s: int | None
    # Expected energy per stored quarter-hour from measured irradiance (the performance
    # model), with its source ("sensor", "satellite"); None: use the clear-sky method.
    expected_wh: FloatArray | None = None
    irradiance_source: str | None = None


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def grid(now_s: int, days: int) -> IntArray:
    """Quarter-hour starts of the last `days` days up to the last one that has ended."""
    end = now_s - now_s % QUARTER_S
    return np.arange(end - days * 86400, end, QUARTER_S, dtype=np.int64)


# --- system.offline ----------------------------------------------------------------------------


def offline(sun: SunGrid, last_reading_s: int | None, now_s: int, settings: Settings) -> Finding:
    """Daylight hours (sun above 5°) since the last stored quarter-hour ended, counted on the
    quarter-hour grid of `sun` (which must reach back far enough; older hours are not
    counted, so a gap longer than the grid counts only the grid's daylight)."""
    if last_reading_s is None:
        return Finding(AlertType.OFFLINE, Verdict.UNKNOWN, {"last_reading_at": None})
    since = last_reading_s + QUARTER_S
    ended = (sun.starts >= since) & (sun.starts + QUARTER_S <= now_s)
    quarters = int(np.count_nonzero(ended & (sun.elevation_deg > DAYLIGHT_ELEVATION_DEG)))
    hours = quarters / 4
    verdict = Verdict.HOLDS if hours >= settings.offline_after_hours else Verdict.CLEAR
    return Finding(
        AlertType.OFFLINE,
        verdict,
        {
            "last_reading_at": iso(last_reading_s),
            "daylight_hours_since_last_reading": hours,
            "offline_after_hours": settings.offline_after_hours,
        },
    )


# --- system.zero_production --------------------------------------------------------------------


def zero_production(sun: SunGrid, observations: Observations) -> Finding:
    """`sun` is at the stored quarter-hours (`observations.starts`)."""
    bright = (sun.elevation_deg >= ZERO_ELEVATION_DEG) & (sun.aoi_deg < 90.0)
    energy = observations.energy_wh[bright]
    if energy.size == 0:
        return Finding(AlertType.ZERO_PRODUCTION, Verdict.UNKNOWN)
    producing = np.flatnonzero(energy > 0.0)
    run = energy.size - (int(producing[-1]) + 1 if producing.size else 0)
    starts = observations.starts[bright]
    if run >= ZERO_RUN:
        first = int(starts[-run])
        elevations = sun.elevation_deg[bright][-run:]
        return Finding(
            AlertType.ZERO_PRODUCTION,
            Verdict.HOLDS,
            {
                "first_zero_quarter_hour": iso(first),
                "last_zero_quarter_hour": iso(int(starts[-1])),
                "zero_quarter_hours": run,
                "min_sun_elevation_deg": round(float(elevations.min()), 1),
                "last_producing_quarter_hour": iso(int(starts[producing[-1]]))
                if producing.size
                else None,
            },
        )
    if producing.size == 0:
        return Finding(AlertType.ZERO_PRODUCTION, Verdict.UNKNOWN)
    return Finding(
        AlertType.ZERO_PRODUCTION,
        Verdict.CLEAR,
        {
            "producing_quarter_hour": iso(int(starts[producing[-1]])),
            "energy_wh": float(energy[producing[-1]]),
        },
    )


# --- system.underperforming --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DayRatios:
    """Per solar day of the history: its best ratio to the clear sky, and its daylight
    coverage."""

    day: IntArray  # solar day number (days since the epoch at the site's longitude)
    daylight: IntArray  # quarter-hours with the sun above 5°
    present: IntArray  # ... of which have a reading
    envelope: FloatArray  # the day's highest quarter-hour ratio (NaN: too few rated)


def day_ratios(site: Site, sun: SunGrid, clear_wh: FloatArray, energy_wh: FloatArray) -> DayRatios:
    """`sun`, `clear_wh` and `energy_wh` on the full quarter-hour grid (NaN: no reading)."""
    day = (sun.starts + int(site.longitude * 240)) // 86400
    first = int(day[0])
    index = (day - first).astype(np.int64)
    days = int(index[-1]) + 1
    present = ~np.isnan(energy_wh)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = energy_wh / clear_wh
    rated = (
        present
        & (sun.elevation_deg >= RATIO_ELEVATION_DEG)
        & (sun.aoi_deg < RATIO_MAX_AOI_DEG)
        & (clear_wh > 0)
    )
    count = np.bincount(index[rated], minlength=days)
    best = np.full(days, -np.inf)
    np.maximum.at(best, index[rated], ratio[rated])
    envelope = np.where(count >= ENVELOPE_MIN_QUARTERS, best, np.nan)
    daylight_mask = sun.elevation_deg > DAYLIGHT_ELEVATION_DEG
    return DayRatios(
        day=np.arange(first, first + days, dtype=np.int64),
        daylight=np.bincount(index[daylight_mask], minlength=days),
        present=np.bincount(index[daylight_mask & present], minlength=days),
        envelope=envelope,
    )


def underperforming(
    site: Site,
    sun: SunGrid,
    observations: Observations,
    now_s: int,
    settings: Settings,
    clear_wh: FloatArray,
    *,
    frozen_baseline: float | None = None,
) -> Finding:
    """The energy performance index of the last 7 complete solar days. `sun` is on the full
    quarter-hour grid of the history (`grid(now_s, HISTORY_DAYS)`), `clear_wh` the clear-sky
    energy on it. `frozen_baseline`: the baseline an open alert was judged against, kept so a long fault
    does not become the system's new normal."""
    energy = np.full(sun.starts.size, np.nan)
    position = np.searchsorted(sun.starts, observations.starts)
    inside = (position < sun.starts.size) & (
        sun.starts[np.minimum(position, sun.starts.size - 1)] == observations.starts
    )
    energy[position[inside]] = observations.energy_wh[inside]
    today = (now_s + int(site.longitude * 240)) // 86400
    threshold = settings.underperformance_threshold
    if observations.expected_wh is not None:
        expected = np.full(sun.starts.size, np.nan)
        expected[position[inside]] = observations.expected_wh[inside]
        return _measured(sun, energy, expected, observations, today, site, threshold)

    ratios = day_ratios(site, sun, clear_wh, energy)
    return judge_window(ratios, today, site, threshold, frozen_baseline=frozen_baseline)


def judge_window(
    ratios: DayRatios,
    today: int,
    site: Site,
    threshold: float,
    *,
    frozen_baseline: float | None = None,
) -> Finding:
    """The clear-sky method's verdict on the 7 solar days before `today`."""
    window = (ratios.day >= today - WINDOW_DAYS) & (ratios.day < today)
    before = (ratios.day >= today - WINDOW_DAYS - BASELINE_DAYS) & (
        ratios.day < today - WINDOW_DAYS
    )
    daylight = int(ratios.daylight[window].sum())
    coverage = int(ratios.present[window].sum()) / daylight if daylight else 0.0
    evidence: dict[str, float | int | str | None] = {
        "window_from": iso(int(ratios.day[window][0]) * 86400 - int(site.longitude * 240))
        if window.any()
        else None,
        "window_days": WINDOW_DAYS,
        "coverage": round(coverage, 3),
        "irradiance_source": "clear_sky_envelope",
        "underperformance_threshold": threshold,
    }
    rated = window & ~np.isnan(ratios.envelope)
    if coverage < MIN_COVERAGE or not rated.any():
        return Finding(AlertType.UNDERPERFORMING, Verdict.UNKNOWN, evidence)
    level = float(np.max(ratios.envelope[rated]))
    if frozen_baseline is not None:
        baseline, source = frozen_baseline, "frozen_at_opening"
    else:
        history = before & ~np.isnan(ratios.envelope)
        if np.count_nonzero(history) >= BASELINE_MIN_DAYS:
            baseline = float(np.quantile(ratios.envelope[history], BASELINE_QUANTILE))
            source = "own_history"
        else:
            baseline, source = 1.0, "clear_sky_model"
    index = level / baseline
    evidence.update(
        {
            "energy_performance_index": round(index, 3),
            "best_clear_sky_ratio": round(level, 3),
            "baseline_ratio": round(baseline, 4),
            "baseline_source": source,
        }
    )
    verdict = Verdict.HOLDS if index < threshold else Verdict.CLEAR
    return Finding(AlertType.UNDERPERFORMING, verdict, evidence)


def _measured(
    sun: SunGrid,
    energy: FloatArray,
    expected: FloatArray,
    observations: Observations,
    today: int,
    site: Site,
    threshold: float,
) -> Finding:
    """EPI = Σ energy ÷ Σ expected over the window's quarter-hours that have both: the
    performance model with measured irradiance already accounts for the weather."""
    day = (sun.starts + int(site.longitude * 240)) // 86400
    window = (day >= today - WINDOW_DAYS) & (day < today)
    daylight = window & (sun.elevation_deg > DAYLIGHT_ELEVATION_DEG)
    both = daylight & ~np.isnan(energy) & ~np.isnan(expected)
    coverage = int(np.count_nonzero(both)) / max(int(np.count_nonzero(daylight)), 1)
    total_expected = float(expected[both].sum())
    evidence: dict[str, float | int | str | None] = {
        "window_days": WINDOW_DAYS,
        "coverage": round(coverage, 3),
        "irradiance_source": observations.irradiance_source,
        "underperformance_threshold": threshold,
    }
    if coverage < MIN_COVERAGE or total_expected <= 0:
        return Finding(AlertType.UNDERPERFORMING, Verdict.UNKNOWN, evidence)
    index = float(energy[both].sum()) / total_expected
    evidence["energy_performance_index"] = round(index, 3)
    evidence["energy_wh"] = round(float(energy[both].sum()), 3)
    evidence["expected_energy_wh"] = round(total_expected, 3)
    verdict = Verdict.HOLDS if index < threshold else Verdict.CLEAR
    return Finding(AlertType.UNDERPERFORMING, verdict, evidence)


# --- all rules -----------------------------------------------------------------------------------


def evaluate(
    site: Site,
    observations: Observations,
    now_s: int,
    settings: Settings,
    *,
    frozen_baseline: float | None = None,
    sky: SkyCache = PROCESS_SKY,
) -> tuple[Finding, Finding, Finding]:
    """Every rule over `observations`, which hold the stored quarter-hours of the last
    `HISTORY_DAYS` days (older ones are ignored). The sun and the clear sky come from `sky`
    (the process's cache of them per site and UTC day)."""
    full = grid(now_s, HISTORY_DAYS)
    sun, clear_wh = sky.window(site, full)
    kept = observations.starts >= full[0]
    if not kept.all():
        observations = Observations(
            observations.starts[kept],
            observations.energy_wh[kept],
            observations.last_reading_s,
            None if observations.expected_wh is None else observations.expected_wh[kept],
            observations.irradiance_source,
        )
    position = np.searchsorted(full, observations.starts)
    at_readings = _take(sun, np.clip(position, 0, full.size - 1))
    return (
        offline(sun, observations.last_reading_s, now_s, settings),
        zero_production(at_readings, observations),
        underperforming(
            site, sun, observations, now_s, settings, clear_wh, frozen_baseline=frozen_baseline
        ),
    )


def evaluate_with_sky_of(
    sky_days: int,
    site: Site,
    observations: Observations,
    now_s: int,
    settings: Settings,
    frozen_baseline: float | None,
) -> tuple[Finding, Finding, Finding]:
    """`evaluate` with the process's sky cache sized to `sky_days` site-days: what a job
    hands to the CPU process (`kit.cpu.off_loop`), whose cache is its own, sized as the
    caller's."""
    if PROCESS_SKY.max_days != sky_days:
        PROCESS_SKY.resize(sky_days)
    return evaluate(site, observations, now_s, settings, frozen_baseline=frozen_baseline)


def _take(sun: SunGrid, index: IntArray) -> SunGrid:
    """What the rules read of the sun at `index` of its grid."""
    return SunGrid(
        starts=sun.starts[index],
        elevation_deg=sun.elevation_deg[index],
        aoi_deg=sun.aoi_deg[index],
    )
