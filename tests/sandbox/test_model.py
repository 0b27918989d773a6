"""The simulators as pure functions: determinism, range independence, physics invariants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solarapi.sandbox import model, prices, weather
from solarapi.sandbox.cache import BoundedCache
from solarapi.sandbox.model import PvParams, simulate
from solarapi.sandbox.prices import simulate_prices

ROOF_NL = PvParams("sys_unit_nl", 52.09, 5.12, "Europe/Amsterdam", 8.0, 7.0, 35.0, 180.0)
PARK_DE = PvParams("sys_unit_de", 52.25, 13.6, "Europe/Berlin", 750.0, 600.0, 20.0, 180.0)
ROOF_AU = PvParams("sys_unit_au", -33.87, 151.21, "Australia/Sydney", 6.6, 5.0, 20.0, 0.0)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_same_numbers_after_the_cache_is_dropped() -> None:
    first = simulate(ROOF_NL, utc(2025, 6, 1), utc(2025, 6, 8))
    model.clear_cache()
    second = simulate(ROOF_NL, utc(2025, 6, 1), utc(2025, 6, 8))
    assert np.array_equal(first.energy_wh, second.energy_wh)
    assert np.array_equal(first.starts, second.starts)


def test_a_sub_range_equals_the_slice_of_a_larger_range() -> None:
    """Month-sized cache chunks must not show: any range gives the same quarter-hours."""
    whole = simulate(ROOF_AU, utc(2025, 1, 20), utc(2025, 3, 10))
    model.clear_cache()
    part = simulate(ROOF_AU, utc(2025, 1, 31, 13, 45), utc(2025, 2, 1, 2, 15))
    offset = int((utc(2025, 1, 31, 13, 45) - utc(2025, 1, 20)).total_seconds()) // 900
    assert len(part) == 50
    assert np.array_equal(part.starts, whole.starts[offset : offset + 50])
    assert np.array_equal(part.energy_wh, whole.energy_wh[offset : offset + 50])
    # The uncached path agrees too — to rounding only: numpy's SIMD kernels may differ in the
    # last bit between array lengths, which is why the cache always computes whole months.
    direct = model.quarter_hour_energy(ROOF_AU, part.starts)
    assert np.allclose(direct, part.energy_wh, rtol=1e-6, atol=1e-6)


def test_nights_are_zero_days_are_not_and_nothing_is_nan() -> None:
    series = simulate(ROOF_NL, utc(2025, 6, 21), utc(2025, 6, 22))
    assert not np.isnan(series.energy_wh).any()
    assert (series.energy_wh >= 0).all()
    hours = (series.starts % 86400) // 3600  # UTC; Amsterdam is UTC+2 in June
    assert (series.energy_wh[(hours >= 21) | (hours < 2)] == 0.0).all()
    assert (series.energy_wh[(hours >= 9) & (hours < 13)] > 0).all()


def test_energy_is_mean_power_over_a_quarter_hour() -> None:
    series = simulate(PARK_DE, utc(2025, 5, 1), utc(2025, 5, 3))
    assert np.allclose(series.energy_wh * 4, series.power_max_w, rtol=1e-12, atol=0)


def test_the_park_clips_at_its_inverter_and_never_exceeds_it() -> None:
    series = simulate(PARK_DE, utc(2025, 4, 1), utc(2025, 9, 1))
    assert series.power_max_w.max() <= 600_000.0 + 1e-6
    # It is sized to clip: on bright days whole quarter-hours sit at the limit.
    assert (series.power_max_w > 599_999.0).sum() > 20


def test_without_an_inverter_limit_the_clipped_quarter_hours_produce_more() -> None:
    unlimited = PvParams(**{**PARK_DE.__dict__, "inverter_capacity_kw": None})
    clipped = simulate(PARK_DE, utc(2025, 6, 1), utc(2025, 7, 1))
    free = simulate(unlimited, utc(2025, 6, 1), utc(2025, 7, 1))
    at_limit = clipped.power_max_w > 599_999.0
    assert at_limit.any()
    assert (free.power_max_w[at_limit] > clipped.power_max_w[at_limit]).all()
    assert free.power_max_w.max() > 600_000.0


def test_weather_depends_on_system_and_day() -> None:
    other = PvParams(**{**ROOF_NL.__dict__, "system_id": "sys_unit_other"})
    one = simulate(ROOF_NL, utc(2025, 7, 1), utc(2025, 7, 15)).energy_wh.reshape(-1, 96).sum(1)
    two = simulate(other, utc(2025, 7, 1), utc(2025, 7, 15)).energy_wh.reshape(-1, 96).sum(1)
    assert not np.allclose(one, two)
    # Days differ from each other (weather), not just a clear-sky curve repeated.
    assert one.std() / one.mean() > 0.1


def test_daily_weather_is_persistent_and_standard_normal() -> None:
    days = np.arange(730_000, 734_000, dtype=np.int64)
    anomaly = weather.daily_anomaly("sys_stats", days)
    assert abs(anomaly.mean()) < 0.1
    assert 0.9 < anomaly.std() < 1.1
    lag1 = np.corrcoef(anomaly[:-1], anomaly[1:])[0, 1]
    lag10 = np.corrcoef(anomaly[:-10], anomaly[10:])[0, 1]
    assert 0.2 < lag1 < 0.45
    assert abs(lag10) < 0.08


def test_local_day_grid_on_dst_days() -> None:
    # 2025-03-30 in Amsterdam: local midnight to midnight is 23 h = 92 quarter-hours.
    tz = ZoneInfo("Europe/Amsterdam")
    start = datetime(2025, 3, 30, tzinfo=tz)
    end = datetime(2025, 3, 31, tzinfo=tz)
    assert len(simulate(ROOF_NL, start, end)) == 92
    start = datetime(2025, 10, 26, tzinfo=tz)
    end = datetime(2025, 10, 27, tzinfo=tz)
    assert len(simulate(ROOF_NL, start, end)) == 100


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (datetime(2025, 1, 1), utc(2025, 1, 2), "aware"),
        (utc(2025, 1, 1, 0, 5), utc(2025, 1, 2), "15-minute grid"),
        (utc(2025, 1, 2), utc(2025, 1, 1), "before start"),
    ],
)
def test_bad_ranges_are_refused(start: datetime, end: datetime, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate(ROOF_NL, start, end)
    with pytest.raises(ValueError, match=message):
        simulate_prices("NL", start, end)


def test_an_empty_range_is_empty() -> None:
    assert len(simulate(ROOF_NL, utc(2025, 1, 1), utc(2025, 1, 1))) == 0
    starts, values = simulate_prices("NL", utc(2025, 1, 1), utc(2025, 1, 1))
    assert starts.size == values.size == 0


def test_bounded_cache_evicts_least_recently_used() -> None:
    cache: BoundedCache[int, str] = BoundedCache(2)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache.get(1) == "a"  # 1 is now the most recent
    cache.put(3, "c")
    assert len(cache) == 2
    assert cache.get(2) is None
    assert cache.get(1) == "a"
    assert cache.get(3) == "c"


def test_cached_months_are_read_only() -> None:
    series = simulate(ROOF_NL, utc(2025, 2, 1), utc(2025, 3, 1))
    series.energy_wh[0] = 123.0  # the caller's copy is its own
    again = simulate(ROOF_NL, utc(2025, 2, 1), utc(2025, 3, 1))
    assert again.energy_wh[0] != 123.0


# --- prices -----------------------------------------------------------------------------------


def _year_prices(zone: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    starts, values = simulate_prices(zone, utc(2025, 1, 1), utc(2026, 1, 1))
    tz = ZoneInfo("Europe/Berlin")
    local = [datetime.fromtimestamp(int(s), tz) for s in starts]
    hours = np.array([t.hour for t in local])
    months = np.array([t.month for t in local])
    weekend = np.array([t.weekday() >= 5 for t in local])
    return values, hours, np.stack([months, weekend])


def test_prices_are_deterministic_and_range_independent() -> None:
    starts, values = simulate_prices("DE-LU", utc(2025, 3, 1), utc(2025, 5, 1))
    prices.clear_cache()
    part_starts, part = simulate_prices("DE-LU", utc(2025, 3, 31, 22), utc(2025, 4, 1, 3))
    offset = int(np.searchsorted(starts, part_starts[0]))
    assert np.array_equal(part, values[offset : offset + len(part)])
    assert np.array_equal(np.diff(starts), np.full(len(starts) - 1, 900))
    # Published in cents.
    assert np.array_equal(np.round(values, 2), values)


def test_prices_have_daily_weekly_and_seasonal_shape() -> None:
    values, hours, (months, weekend) = _year_prices("DE-LU")
    weekday = ~weekend.astype(bool)
    by_hour = np.array([values[weekday & (hours == h)].mean() for h in range(24)])
    assert by_hour[7:10].max() > by_hour[3]  # morning peak above the night
    assert by_hour[18:21].max() > by_hour[7:10].max()  # evening peak is the day's highest
    assert by_hour[12:15].min() < by_hour[7:10].max()  # solar-noon dip between the peaks
    assert values[weekend.astype(bool)].mean() < values[weekday].mean()
    winter = np.isin(months, [1, 2, 12])
    summer = np.isin(months, [6, 7, 8])
    assert values[winter].mean() > values[summer].mean()


def test_negative_prices_are_occasional_and_at_midday() -> None:
    values, hours, (months, _weekend) = _year_prices("DE-LU")
    negative = values < 0
    assert 0.002 < negative.mean() < 0.06
    assert set(hours[negative]) <= set(range(9, 18))
    assert not negative[np.isin(months, [11, 12, 1])].any()


def test_zones_differ_in_level_and_unknown_zones_are_refused() -> None:
    poland, _, _ = _year_prices("PL")
    sweden, _, _ = _year_prices("SE3")
    assert poland.mean() > 1.5 * sweden.mean()
    with pytest.raises(ValueError, match="unknown bidding zone"):
        simulate_prices("XX", utc(2025, 1, 1), utc(2025, 1, 2))


def test_is_cached_reports_whole_months_only() -> None:
    model.clear_cache()
    assert not model.is_cached(ROOF_NL, utc(2025, 8, 10), utc(2025, 8, 11))
    simulate(ROOF_NL, utc(2025, 8, 10), utc(2025, 8, 11))
    assert model.is_cached(ROOF_NL, utc(2025, 8, 1), utc(2025, 9, 1))
    assert not model.is_cached(ROOF_NL, utc(2025, 8, 31), utc(2025, 9, 2))


_YEAR_START = utc(2025, 1, 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.integers(min_value=0, max_value=365 * 96 - 1),
    length=st.integers(min_value=0, max_value=40 * 96),
)
def test_any_range_is_the_slice_of_the_year(first: int, length: int) -> None:
    year = simulate(ROOF_AU, _YEAR_START, utc(2026, 1, 1))
    last = min(first + length, 365 * 96)
    start = _YEAR_START + timedelta(minutes=15 * first)
    end = _YEAR_START + timedelta(minutes=15 * last)
    part = simulate(ROOF_AU, start, end)
    assert np.array_equal(part.energy_wh, year.energy_wh[first:last])
    starts, values = simulate_prices("NL", start, end)
    _, year_prices = simulate_prices("NL", _YEAR_START, utc(2026, 1, 1))
    assert np.array_equal(values, year_prices[first:last])
    assert len(starts) == last - first
