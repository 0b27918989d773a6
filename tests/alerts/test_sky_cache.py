"""The alert rules through the sun and clear-sky cache (`sky.SkyCache`) find what they found
computing the 38-day window anew at every evaluation: the same verdicts and the same
evidence, for sandbox systems with an outage, daylight zeros, a derate and a correction to
old readings, evaluated every 4 h 15 min across 20 days with the service's frozen baseline.

The reference is the evaluation before the cache, kept here as it was: pvlib's sun at the
whole window's midpoints (with the index `pd.to_datetime` made) and the clear sky on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pvlib
import pytest

from solarapi.alerts import detectors
from solarapi.alerts import sky as sky_module
from solarapi.alerts.detectors import Finding, Observations, Settings, Verdict
from solarapi.alerts.sky import (
    QUARTER_S,
    Site,
    SkyCache,
    Sun,
    _day_of_year,
    clear_sky_energy_wh,
    sun_at,
)
from solarapi.models.alerts import AlertType
from solarapi.sandbox.model import PvParams, quarter_hour_energy

DAY = 86400
START = int(datetime(2025, 2, 10, tzinfo=UTC).timestamp())
# (latitude, longitude, tilt, azimuth, capacity kWp, inverter kW): north and south, west and
# east of Greenwich, facing the equator and east, one clipped by its inverter.
SITES = [
    (52.38, 4.64, 35.0, 180.0, 8.0, None),
    (-33.87, 151.21, 20.0, 0.0, 30.0, 24.0),
    (40.42, -3.70, 10.0, 90.0, 4.0, None),
    (47.61, -122.33, 30.0, 200.0, 250.0, 200.0),
]

# Every 4 h 15 min (so at every time of day) across 20 days, the window reaching back to
# the history's first day at the start.
TIMES = range(START + 32 * DAY + 7 * 60, START + 52 * DAY, 4 * 3600 + 15 * 60)


def reference_sun_at(site: Site, starts: np.ndarray) -> Sun:
    """`sky.sun_at` as it was before the cache."""
    times = pd.DatetimeIndex(pd.to_datetime(starts + QUARTER_S // 2, unit="s", utc=True))
    position = pvlib.solarposition.ephemeris(times, site.latitude, site.longitude)
    zenith = position["zenith"].to_numpy(dtype=np.float64)
    azimuth = position["azimuth"].to_numpy(dtype=np.float64)
    aoi = np.asarray(
        pvlib.irradiance.aoi(site.tilt_deg, site.azimuth_deg, zenith, azimuth), dtype=np.float64
    )
    return Sun(
        starts=starts,
        elevation_deg=position["elevation"].to_numpy(dtype=np.float64),
        aoi_deg=aoi,
        zenith_deg=zenith,
        apparent_zenith_deg=position["apparent_zenith"].to_numpy(dtype=np.float64),
        azimuth_deg=azimuth,
    )


def reference_evaluate(
    site: Site,
    observations: Observations,
    now_s: int,
    settings: Settings,
    frozen_baseline: float | None,
) -> tuple[Finding, Finding, Finding]:
    """`detectors.evaluate` as it was before the cache: the whole window computed anew."""
    full = detectors.grid(now_s, detectors.HISTORY_DAYS)
    sun = reference_sun_at(site, full)
    kept = observations.starts >= full[0]
    observations = Observations(
        observations.starts[kept], observations.energy_wh[kept], observations.last_reading_s
    )
    position = np.clip(np.searchsorted(full, observations.starts), 0, full.size - 1)
    at_readings = Sun(
        sun.starts[position],
        sun.elevation_deg[position],
        sun.aoi_deg[position],
        sun.zenith_deg[position],
        sun.apparent_zenith_deg[position],
        sun.azimuth_deg[position],
    )
    return (
        detectors.offline(sun, observations.last_reading_s, now_s, settings),
        detectors.zero_production(at_readings, observations),
        # The clear sky computed from the whole window's `Sun`, as before.
        detectors.underperforming(
            site,
            sun,
            observations,
            now_s,
            settings,
            clear_sky_energy_wh(site, sun),
            frozen_baseline=frozen_baseline,
        ),
    )


@dataclass
class Watch:
    """The service's open underperformance alert, whose baseline is frozen while open."""

    baseline: float | None = None
    seen: set[tuple[AlertType, Verdict]] = field(default_factory=set)

    def after(self, findings: tuple[Finding, Finding, Finding]) -> None:
        self.seen.update((finding.type, finding.verdict) for finding in findings)
        under = findings[2]
        if under.verdict is Verdict.HOLDS and self.baseline is None:
            value = under.evidence["baseline_ratio"]
            assert isinstance(value, float)
            self.baseline = value
        elif under.verdict is Verdict.CLEAR:
            self.baseline = None


def faulty_history(number: int, spec: tuple[float, ...]) -> tuple[Site, np.ndarray, np.ndarray]:
    latitude, longitude, tilt, azimuth, capacity, inverter = spec
    site = Site(latitude, longitude, tilt, azimuth, capacity, inverter)
    params = PvParams(
        f"sys_sky_cache_{number}", latitude, longitude, "UTC", capacity, inverter, tilt, azimuth
    )
    starts = np.arange(START, START + 52 * DAY, QUARTER_S, dtype=np.int64)
    energy = quarter_hour_energy(params, starts)
    day = (starts - START) // DAY
    energy[day >= 30] *= 0.5  # a derate from day 30
    energy[(starts >= START + 45 * DAY) & (starts < START + 47 * DAY)] = 0.0  # two dead days
    return site, starts, energy


def test_findings_through_the_cache_are_those_of_the_whole_window_computed_anew() -> None:
    # Small enough that the four systems' windows (4 × 39 site-days) evict each other, so
    # both hits and recomputed days are judged.
    sky = SkyCache(max_days=100)
    settings = Settings()
    evaluations = 0
    for number, spec in enumerate(SITES):
        site, starts, energy = faulty_history(number, spec)
        cached, reference = Watch(), Watch()
        outage = (starts >= START + 42 * DAY) & (starts < START + 43 * DAY + 7 * 3600)
        for now_s in TIMES:
            stored = (starts < now_s - now_s % QUARTER_S) & ~outage
            observed = energy.copy()
            if now_s >= START + 48 * DAY:
                # A correction: the derate's first days uploaded again at full power.
                fixed = (starts >= START + 30 * DAY) & (starts < START + 36 * DAY)
                observed[fixed] = energy[fixed] * 2
            observations = Observations(starts[stored], observed[stored], int(starts[stored][-1]))
            new = detectors.evaluate(
                site, observations, now_s, settings, frozen_baseline=cached.baseline, sky=sky
            )
            old = reference_evaluate(site, observations, now_s, settings, reference.baseline)
            assert new == old, (number, datetime.fromtimestamp(now_s, UTC))
            cached.after(new)
            reference.after(old)
            evaluations += 1
        # The scenario is not vacuous: every rule both held and cleared.
        for alert_type in AlertType:
            assert (alert_type, Verdict.HOLDS) in cached.seen, (number, alert_type)
            assert (alert_type, Verdict.CLEAR) in cached.seen, (number, alert_type)
    assert evaluations == len(SITES) * len(TIMES)
    assert len(sky) <= 100


def test_a_correction_to_old_readings_changes_the_cached_evaluation() -> None:
    sky = SkyCache()
    site, starts, energy = faulty_history(0, SITES[0])
    now_s = START + 40 * DAY + 12 * 3600
    stored = starts < now_s

    def underperforming(values: np.ndarray) -> Finding:
        observations = Observations(starts[stored], values[stored], int(starts[stored][-1]))
        return detectors.evaluate(site, observations, now_s, Settings(), sky=sky)[2]

    derated = underperforming(energy)
    assert derated.verdict is Verdict.HOLDS
    corrected = energy.copy()
    corrected[(starts >= START + 30 * DAY)] *= 2
    assert underperforming(corrected).verdict is Verdict.CLEAR
    assert underperforming(energy) == derated


def test_the_cache_keeps_at_most_its_bound_and_the_values_of_a_computation() -> None:
    sky = SkyCache(max_days=45)
    site = Site(*SITES[1])
    now_s = START + 60 * DAY + 5 * 3600
    full = detectors.grid(now_s, detectors.HISTORY_DAYS)
    for shift in (0, 3 * DAY, 3 * DAY):  # the last one: every day a hit
        sun, clear_wh = sky.window(site, full + shift)
        assert len(sky) == 39 + shift // DAY
    # Another site evicts the first one's oldest days, never beyond the bound.
    sky.window(Site(*SITES[0]), full)
    assert len(sky) == 45
    # Days computed together (the cache's clear sky only where the sun is up): bit for bit
    # pvlib's sun on them and the clear sky of that sun, at night too.
    for spec in SITES:
        site = Site(*spec)
        days = np.arange(START, START + 3 * DAY, QUARTER_S, dtype=np.int64)
        sun, clear_wh = SkyCache().window(site, days)
        expected = sun_at(site, days)
        assert np.array_equal(sun.elevation_deg, expected.elevation_deg)
        assert np.array_equal(sun.aoi_deg, expected.aoi_deg)
        assert np.array_equal(clear_wh, clear_sky_energy_wh(site, expected))
        assert (clear_wh[expected.elevation_deg <= 0] == 0).all()


def test_a_resized_cache_drops_its_least_recently_used_days_and_zero_keeps_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed: list[int] = []
    compute = sky_module._compute_days

    def counting(site: Site, days: list[int]) -> list[np.ndarray]:
        computed.extend(days)
        return compute(site, days)

    monkeypatch.setattr(sky_module, "_compute_days", counting)
    sky = SkyCache(max_days=100)
    first, second = Site(*SITES[0]), Site(*SITES[1])
    now_s = START + 60 * DAY + 5 * 3600
    full = detectors.grid(now_s, detectors.HISTORY_DAYS)
    sky.window(first, full)
    expected = sky.window(second, full)
    assert len(sky) == 78
    sky.window(first, full[-4:])  # the first site's last hour (its last day): used last
    sky.resize(40)
    assert len(sky) == 40
    # Kept: the first site's last day and the second site's 39, which answer without pvlib.
    computed.clear()
    kept = sky.window(second, full)
    assert computed == []
    assert len(sky) == 40
    sky.window(first, full[-4:])
    assert computed == []
    assert np.array_equal(kept[1], expected[1])
    sky.resize(0)
    assert len(sky) == 0
    again = sky.window(second, full)
    assert len(sky) == 0
    assert len(computed) == 39
    assert np.allclose(again[1], expected[1], rtol=0, atol=1e-9)
    assert np.allclose(again[0].elevation_deg, expected[0].elevation_deg, rtol=0, atol=1e-5)


def test_the_day_of_the_year_is_pandas_one_across_leap_years() -> None:
    for year in (2024, 2025, 2028):
        first = int(datetime(year, 12, 28, tzinfo=UTC).timestamp())
        starts = np.arange(first, first + 6 * DAY, QUARTER_S, dtype=np.int64)
        expected = pd.DatetimeIndex(pd.to_datetime(starts, unit="s", utc=True)).day_of_year
        assert np.array_equal(_day_of_year(starts), expected.to_numpy())
