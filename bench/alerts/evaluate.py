"""Evaluation of the alert rules on simulated production (issue 31's quality targets).

Builds `--systems` system-years (default 52) with the sandbox's physical model at different
sites and orientations, injects faults into copies — outages of 2 h to 10 days, daylight
zeros of 1 h to 3 days, derates of 15, 30 and 50 % from a known day — keeps the fault-free
twins, and runs the rules exactly as the service does (`solarapi.alerts.detectors`):

- offline: evaluated every 15 minutes of wall-clock time through each outage (data stops),
  and on the twins after every nightly batch with `offline_after_hours` 24;
- zero production: evaluated after every stored quarter-hour (the upload), from the fault's
  first quarter-hour under a sun ≥ 15° in front of the panel;
- underperforming: evaluated once a solar day (the 7-day window moves by days), with the
  baseline frozen while an alert is open, as the service keeps it.

Prints recall, false alarms per system-year on the twins, detection delays, and the CPU
cost of one evaluation pass. Usage: `.venv/bin/python bench/alerts/evaluate.py [--systems N]`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from solarapi.alerts import detectors
from solarapi.alerts.detectors import Observations, Settings, Verdict
from solarapi.alerts.sky import QUARTER_S, Site, SkyCache, Sun, SunGrid, clear_sky_energy_wh, sun_at
from solarapi.sandbox.model import PvParams, quarter_hour_energy

SITES = [
    (52.38, 4.64, "Europe/Amsterdam"),
    (48.14, 11.58, "Europe/Berlin"),
    (-33.87, 151.21, "Australia/Sydney"),
    (40.42, -3.70, "Europe/Madrid"),
    (59.33, 18.07, "Europe/Stockholm"),
    (45.46, 9.19, "Europe/Rome"),
    (51.51, -0.13, "Europe/London"),
    (37.98, 23.73, "Europe/Athens"),
    (50.85, 4.35, "Europe/Brussels"),
    (60.17, 24.94, "Europe/Helsinki"),
    (43.30, 5.37, "Europe/Paris"),
    (-37.81, 144.96, "Australia/Melbourne"),
    (55.68, 12.57, "Europe/Copenhagen"),
]
ORIENTATIONS = [(35.0, 0.0), (20.0, -90.0), (10.0, 90.0), (45.0, 30.0)]  # tilt, azimuth offset
YEAR = 2024
DERATES = (0.15, 0.30, 0.50)
WARM_UP_DAYS = 40  # the underperformance rule's history before the first judged day


@dataclass
class SystemYear:
    site: Site
    starts: np.ndarray
    energy: np.ndarray
    sun: Sun
    clear: np.ndarray


def build(count: int) -> list[SystemYear]:
    start = int(datetime(YEAR, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(YEAR + 1, 1, 1, tzinfo=UTC).timestamp())
    starts = np.arange(start, end, QUARTER_S, dtype=np.int64)
    systems = []
    for number in range(count):
        latitude, longitude, timezone = SITES[number % len(SITES)]
        tilt, offset = ORIENTATIONS[(number // len(SITES)) % len(ORIENTATIONS)]
        azimuth = ((180.0 if latitude >= 0 else 0.0) + offset) % 360.0
        capacity = [4.0, 8.4, 30.0, 250.0][number % 4]
        inverter = capacity * 0.85 if number % 3 == 0 else None
        params = PvParams(
            f"sys_bench_alerts_{number}", latitude, longitude, timezone, capacity, inverter,
            tilt, azimuth,
        )  # fmt: skip
        site = Site(latitude, longitude, tilt, azimuth, capacity, inverter)
        sun = sun_at(site, starts)
        systems.append(
            SystemYear(
                site,
                starts,
                quarter_hour_energy(params, starts),
                sun,
                clear_sky_energy_wh(site, sun),
            )
        )
    return systems


# --- offline --------------------------------------------------------------------------------


def around(sun: Sun, lo: int, hi: int) -> SunGrid:
    """The sun on the grid's quarter-hours [lo, hi): what the service computes for a gap."""
    return detectors._take(sun, np.arange(max(lo, 0), min(hi, sun.starts.size)))


def offline_outages(systems: list[SystemYear], rng: np.random.Generator) -> dict[str, float]:
    """Each system gets outages of 2 h – 10 days; the rule is evaluated every 15 minutes from
    the last reading until data comes back. An outage is detectable when it holds at least
    `offline_after_hours` (4) of daylight; shorter ones must stay silent."""
    settings = Settings()
    detectable = detected = silent_short = short = 0
    for system in systems:
        for _ in range(6):
            hours = float(np.exp(rng.uniform(np.log(2), np.log(240))))
            first = int(rng.integers(100, system.starts.size - 1200))
            last_reading = int(system.starts[first - 1])
            outage_end = last_reading + QUARTER_S + int(hours * 3600)
            sun = around(system.sun, first, first + int(hours * 4) + 2)
            grid = (sun.starts >= last_reading + QUARTER_S) & (sun.starts < outage_end)
            daylight = np.count_nonzero(grid & (sun.elevation_deg > 5)) / 4
            found = False
            for now in range(last_reading + 2 * QUARTER_S, outage_end + 1, QUARTER_S):
                if detectors.offline(sun, last_reading, now, settings).verdict is Verdict.HOLDS:
                    found = True
                    break
            if daylight >= settings.offline_after_hours:
                detectable += 1
                detected += found
            else:
                short += 1
                silent_short += not found
    return {
        "outages": detectable + short,
        "detectable (≥ 4 daylight hours)": detectable,
        "recall": detected / max(detectable, 1),
        "short outages kept silent": silent_short / max(short, 1),
    }


def offline_twins(systems: list[SystemYear]) -> dict[str, float]:
    """Twins whose logger uploads the day's readings once a night at 02:00 local solar time:
    evaluated every 15 minutes with `offline_after_hours` 24 (the documented setting for daily
    loggers) and with the default 4 (which, as documented, flags such a logger every day)."""
    alarms = {24: 0, 4: 0}
    for system in systems:
        shift = int(system.site.longitude * 240)
        for after in alarms:
            settings = Settings(offline_after_hours=after)
            is_open = False
            for day in range(1, 365):
                upload_at = day * 86400 - shift + 2 * 3600 + int(system.starts[0])
                last = upload_at - 2 * 3600 - QUARTER_S  # the previous day's last quarter-hour
                index = (last - int(system.starts[0])) // QUARTER_S
                sun = around(system.sun, index, index + 4 * 24 * 2)
                # Before the next upload: the last data is the previous night's batch.
                for now in range(upload_at + QUARTER_S, upload_at + 86400, 4 * QUARTER_S):
                    verdict = detectors.offline(sun, last, now, settings).verdict
                    if verdict is Verdict.HOLDS and not is_open:
                        alarms[after] += 1
                        is_open = True
                    elif verdict is Verdict.CLEAR:
                        is_open = False
                is_open = False  # the next batch arrives and resolves it
    years = len(systems)
    return {
        f"false alarms / system-year (daily logger, {k} h)": v / years for k, v in alarms.items()
    }


# --- zero production --------------------------------------------------------------------------


def zero_faults(systems: list[SystemYear], rng: np.random.Generator) -> dict[str, float]:
    """Zeros of 1 h – 3 days starting at a quarter-hour with the sun ≥ 15° in front of the
    panel; the rule runs after every stored quarter-hour. Delay: daylight hours (sun above 5°)
    from the fault's first quarter-hour to the evaluation that opens the alert, counting the
    quarter-hour that completes the evidence."""
    faults = detected = undetectable = 0
    delays: list[float] = []
    for system in systems:
        sun = system.sun
        bright = np.flatnonzero((sun.elevation_deg >= 15) & (sun.aoi_deg < 90))
        for _ in range(6):
            first = int(bright[rng.integers(200, bright.size - 2000)])
            length = int(np.exp(rng.uniform(np.log(4), np.log(288))))
            energy = system.energy.copy()
            energy[first : first + length] = 0.0
            fault_bright = (sun.elevation_deg[first : first + length] >= 15) & (
                sun.aoi_deg[first : first + length] < 90
            )
            if np.count_nonzero(fault_bright) < detectors.ZERO_RUN:
                undetectable += 1  # fewer than 4 quarter-hours under a high sun: by definition
                continue
            faults += 1
            lo = first - 200
            for end in range(first + 1, first + length + 1):
                window = slice(lo, end)
                obs = Observations(
                    system.starts[window], energy[window], int(system.starts[end - 1])
                )
                sub = detectors._take(sun, np.arange(lo, end))
                if detectors.zero_production(sub, obs).verdict is Verdict.HOLDS:
                    detected += 1
                    span = slice(first, end)
                    delays.append(np.count_nonzero(sun.elevation_deg[span] > 5) / 4)
                    break
    # False alarms: the twins scanned the same way (vectorised: runs of 4 bright zeros).
    false = 0
    for system in systems:
        sun = system.sun
        high = (sun.elevation_deg >= 15) & (sun.aoi_deg < 90)
        zeros = system.energy[high] <= 0
        run = 0
        for zero in zeros:
            run = run + 1 if zero else 0
            false += run == 4
    return {
        "faults (≥ 4 quarter-hours under a sun ≥ 15°)": faults,
        "faults shorter than that under a high sun (not counted)": undetectable,
        "recall": detected / faults,
        "delay daylight hours p50": float(np.median(delays)),
        "delay daylight hours p95": float(np.quantile(delays, 0.95)),
        "delay daylight hours max": float(np.max(delays)),
        "share detected within 1 daylight hour": float(np.mean(np.array(delays) <= 1.0)),
        "false alarms / system-year": false / len(systems),
    }


# --- underperforming -----------------------------------------------------------------------


def run_daily(system: SystemYear, energy: np.ndarray, threshold: float) -> list[tuple[int, bool]]:
    """The rule once a solar day with the service's open/resolve/freeze logic; returns
    (day index, opened) for every change."""
    ratios = detectors.day_ratios(system.site, system.sun, system.clear, energy)
    frozen: float | None = None
    changes = []
    first = int(ratios.day[0])
    for today in ratios.day[WARM_UP_DAYS:]:
        finding = detectors.judge_window(
            ratios, int(today), system.site, threshold, frozen_baseline=frozen
        )
        if finding.verdict is Verdict.HOLDS and frozen is None:
            frozen = float(finding.evidence["baseline_ratio"] or 1.0)
            changes.append((int(today) - first, True))
        elif finding.verdict is Verdict.CLEAR and frozen is not None:
            frozen = None
            changes.append((int(today) - first, False))
    return changes


def underperformance(systems: list[SystemYear], rng: np.random.Generator) -> dict[str, float]:
    result: dict[str, float] = {}
    false = {0.8: 0, 0.9: 0}
    for threshold in false:
        for system in systems:
            false[threshold] += sum(
                opened for _, opened in run_daily(system, system.energy, threshold)
            )
    result["false alarms / system-year (threshold 0.8)"] = false[0.8] / len(systems)
    result["false alarms / system-year (threshold 0.9)"] = false[0.9] / len(systems)
    for derate in DERATES:
        threshold = 0.9 if derate < 0.2 else 0.8
        delays: list[int] = []
        faults = 0
        for system in systems:
            day = (system.starts + int(system.site.longitude * 240)) // 86400
            day = day - day[0]
            fault_day = int(rng.integers(60, 330))
            energy = system.energy.copy()
            energy[day >= fault_day] *= 1 - derate
            faults += 1
            opened = [
                d
                for d, is_open in run_daily(system, energy, threshold)
                if is_open and d >= fault_day
            ]
            if opened and opened[0] - fault_day <= 30:
                delays.append(opened[0] - fault_day)
        key = f"derate {int(derate * 100)} % (threshold {threshold})"
        result[f"{key} recall (within 30 days)"] = len(delays) / faults
        result[f"{key} delay days p50"] = float(np.median(delays)) if delays else float("nan")
        result[f"{key} delay days max"] = float(np.max(delays)) if delays else float("nan")
        result[f"{key} within 7 days"] = sum(d <= 7 for d in delays) / faults
    return result


# --- cost -----------------------------------------------------------------------------------


def cost(systems: list[SystemYear], samples: int) -> dict[str, float]:
    """CPU seconds of `detectors.evaluate` (every rule, the 38-day history, as after an
    upload) and of the sweep's offline rule for a system that has not reported for a day,
    scaled to 10,000 systems. The evaluation twice: the first of a system in its process
    (the sun and clear sky of its window computed; an empty `SkyCache`), and the next one, a
    quarter-hour later (every day of the window in the cache). Database reads are not
    included (database_pass.py has them)."""
    now = int(datetime(YEAR, 7, 1, 12, tzinfo=UTC).timestamp())
    history = detectors.grid(now, detectors.HISTORY_DAYS)

    def observations(system: SystemYear, at: int) -> Observations:
        keep = np.searchsorted(system.starts, history + (at - now))
        return Observations(history + (at - now), system.energy[keep], int(history[-1]) + at - now)

    began = time.process_time()
    for number in range(samples):
        system = systems[number % len(systems)]
        detectors.evaluate(system.site, observations(system, now), now, Settings(), sky=SkyCache())
    first = (time.process_time() - began) / samples
    sky = SkyCache()
    for system in systems:
        detectors.evaluate(system.site, observations(system, now), now, Settings(), sky=sky)
    later = now + QUARTER_S
    began = time.process_time()
    for number in range(samples):
        system = systems[number % len(systems)]
        detectors.evaluate(system.site, observations(system, later), later, Settings(), sky=sky)
    cached = (time.process_time() - began) / samples
    began = time.process_time()
    for number in range(samples):
        system = systems[number % len(systems)]
        starts = np.arange(now - 86400, now, QUARTER_S, dtype=np.int64)
        detectors.offline(sun_at(system.site, starts), now - 86400 - QUARTER_S, now, Settings())
    offline = (time.process_time() - began) / samples
    return {
        "full evaluation, the system's first in the process, CPU ms": first * 1000,
        "full evaluation, its window's sun in the cache, CPU ms": cached * 1000,
        "full evaluation of 10,000 systems, first / cached, CPU s": first * 10_000,
        "... cached, CPU s": cached * 10_000,
        "offline sweep of 10,000 silent systems, CPU s": offline * 10_000,
        "one core's budget per 15 minutes, s": 900.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", type=int, default=52, help="system-years to simulate")
    parser.add_argument("--cost-samples", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(31)
    began = time.perf_counter()
    systems = build(args.systems)
    print(f"built {len(systems)} system-years in {time.perf_counter() - began:.0f} s", flush=True)
    for title, numbers in (
        ("system.offline (outages)", offline_outages(systems, rng)),
        ("system.offline (twins)", offline_twins(systems)),
        ("system.zero_production", zero_faults(systems, rng)),
        ("system.underperforming", underperformance(systems, rng)),
        ("cost", cost(systems, args.cost_samples)),
    ):
        print(f"\n{title}", flush=True)
        for name, value in numbers.items():
            print(f"  {name}: {value:.3f}" if isinstance(value, float) else f"  {name}: {value}")
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
