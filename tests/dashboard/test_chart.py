"""The SVG production chart: pure rendering units."""

from __future__ import annotations

import xml.etree.ElementTree as ET  # only for the Element type; parsing is defusedxml
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from defusedxml.ElementTree import fromstring
from hypothesis import example, given, settings
from hypothesis import strategies as st

from solarapi.dashboard.chart import (
    NARROW,
    WIDE,
    ChartPoint,
    Scale,
    energy_scale,
    format_energy,
    label_indices,
    render_chart,
)

AMS = ZoneInfo("Europe/Amsterdam")
SVG = "{http://www.w3.org/2000/svg}"


def _svgs(markup: str) -> list[ET.Element]:
    root = fromstring(f"<root>{markup}</root>")
    return list(root)


def _days(values: list[float | None]) -> list[ChartPoint]:
    first = datetime(2025, 6, 9, 22, tzinfo=UTC)  # local midnight in Amsterdam (CEST)
    return [ChartPoint(first + timedelta(days=i), v) for i, v in enumerate(values)]


def test_scale_is_round_and_covers_the_largest_value() -> None:
    scale = energy_scale([1234.0, None, 28_700.0])
    assert scale.unit == "kWh"
    assert scale.divisor == 1000
    assert scale.top >= 28.7
    assert scale.top == 30
    assert scale.step == 10
    small = energy_scale([12.0, 870.0])
    assert small.unit == "Wh"
    assert small.top == 1000
    # Values below the labels' precision (down to the smallest subnormal) get the finest axis.
    for tiny in (5e-324, 1e-300, 0.001):
        assert energy_scale([tiny]) == Scale("Wh", 1.0, 0.01, 0.01), tiny
    empty = energy_scale([None, None])
    assert empty.top > 0


def test_daily_bars_have_heights_in_proportion_and_visible_gaps() -> None:
    markup = render_chart(_days([10_000.0, None, 25_000.0, 0.0]), "1d", AMS, title="t")
    wide, narrow = _svgs(markup)
    assert wide.get("class") == WIDE.css_class
    assert narrow.get("class") == NARROW.css_class
    bars = [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "bar"]
    gaps = [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "gap"]
    assert [b.get("data-energy-wh") for b in bars] == ["10000.0", "25000.0", "0.0"]
    assert len(gaps) == 1
    assert gaps[0].get("data-start") == "2025-06-10T22:00:00Z"
    heights = [float(b.get("height") or 0) for b in bars]
    # Axis top is 30 kWh: a 10 kWh bar is a third of the plot, 25 kWh five sixths.
    plot_h = WIDE.height - WIDE.top - WIDE.bottom
    assert abs(heights[0] - plot_h / 3) < 0.02
    assert abs(heights[1] - plot_h * 25 / 30) < 0.02
    assert heights[2] == 0
    assert "<polyline" not in markup


def test_short_intervals_draw_a_line_broken_at_missing_buckets() -> None:
    start = datetime(2025, 6, 15, 10, tzinfo=UTC)
    points = [
        ChartPoint(start + timedelta(hours=i), v)
        for i, v in enumerate([100.0, 200.0, None, 300.0, 250.0, 50.0])
    ]
    wide, _ = _svgs(render_chart(points, "1h", AMS, title="t"))
    lines = [p for p in wide.iter(f"{SVG}polyline") if p.get("class") == "line"]
    assert len(lines) == 2
    assert len((lines[0].get("points") or "").split()) == 2
    assert len((lines[1].get("points") or "").split()) == 3
    assert not [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "bar"]
    targets = [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "point"]
    assert [t.get("data-energy-wh") for t in targets] == [
        "100.0",
        "200.0",
        "300.0",
        "250.0",
        "50.0",
    ]


def test_labels_are_local_time_and_round() -> None:
    start = datetime(2025, 6, 14, 22, tzinfo=UTC)  # 00:00 in Amsterdam
    quarter_hours = [ChartPoint(start + timedelta(minutes=15 * i), 1.0) for i in range(96)]
    chosen = label_indices(quarter_hours, "15m", AMS, WIDE.max_labels)
    hours = [quarter_hours[i].start.astimezone(AMS).strftime("%H:%M") for i in chosen]
    assert hours == ["00:00", "03:00", "06:00", "09:00", "12:00", "15:00", "18:00", "21:00"]
    week_hours = [ChartPoint(start + timedelta(hours=i), 1.0) for i in range(24 * 7)]
    chosen = label_indices(week_hours, "1h", AMS, WIDE.max_labels)
    assert all(week_hours[i].start.astimezone(AMS).hour == 0 for i in chosen)
    assert len(chosen) == 7
    wide, _ = _svgs(render_chart(week_hours, "1h", AMS, title="t"))
    texts = [t.text for t in wide.iter(f"{SVG}text")]
    assert "15 Jun" in texts
    assert "21 Jun" in texts


def test_titles_are_escaped() -> None:
    markup = render_chart(_days([1.0]), "1d", AMS, title='<script>alert("x")</script>')
    assert "<script>" not in markup
    assert "&lt;script&gt;" in markup


def test_energy_is_formatted_in_the_unit_people_read() -> None:
    assert format_energy(None) == "no data"
    assert format_energy(950.0) == "950.0 Wh"
    assert format_energy(41_234.5) == "41.23 kWh"


@settings(max_examples=60, deadline=None)
@example([5e-324], "1h")  # found by Hypothesis: the scale took log10 of an underflowed 0
@given(
    st.lists(
        st.one_of(st.none(), st.floats(min_value=0, max_value=5e6, allow_nan=False)),
        min_size=1,
        max_size=120,
    ),
    st.sampled_from(["15m", "1h", "1d", "1M"]),
)
def test_any_series_renders_valid_svg_with_marks_inside_the_plot(
    values: list[float | None], interval: str
) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    step = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1)}.get(interval, timedelta(days=1))
    points = [ChartPoint(start + i * step, v) for i, v in enumerate(values)]
    for svg, layout in zip(
        _svgs(render_chart(points, interval, AMS, title="t")), (WIDE, NARROW), strict=True
    ):
        marks = [r for r in svg.iter(f"{SVG}rect") if r.get("class") in {"bar", "gap", "point"}]
        known = sum(v is not None for v in values)
        gaps = len(values) - known
        assert len(marks) == known + gaps
        for mark in marks:
            x = float(mark.get("x") or 0)
            y = float(mark.get("y") or 0)
            assert layout.left - 0.01 <= x <= layout.width - layout.right + 0.01
            assert layout.top - 0.01 <= y <= layout.height - layout.bottom + 0.01


def test_expected_energy_is_a_level_mark_on_each_bar_and_in_the_scale() -> None:
    points = [
        ChartPoint(p.start, p.energy_wh, expected)
        for p, expected in zip(
            _days([10_000.0, None, 25_000.0, 8_000.0]),
            [12_000.0, None, 34_000.0, None],
            strict=True,
        )
    ]
    wide, narrow = _svgs(render_chart(points, "1d", AMS, title="t"))
    plot_h = WIDE.height - WIDE.top - WIDE.bottom
    base_y = WIDE.top + plot_h
    marks = [e for e in wide.iter(f"{SVG}line") if e.get("class") == "expected"]
    assert [m.get("data-expected-wh") for m in marks] == ["12000.0", "34000.0"]
    # The axis covers the expected 34 kWh, above every measured bar: it tops at 40 kWh.
    assert abs(float(marks[1].get("y1") or 0) - (base_y - plot_h * 34 / 40)) < 0.02
    assert marks[0].get("y1") == marks[0].get("y2")
    bars = [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert [b.get("data-expected-wh") for b in bars] == ["12000.0", "34000.0", ""]
    assert "expected 12.00 kWh" in (bars[0].get("data-label") or "")
    assert "expected" not in (bars[2].get("data-label") or "")
    for svg in (wide, narrow):
        legend = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "legend"]
        assert len(legend) == 1
        assert [t.text for t in legend[0].iter(f"{SVG}text")] == ["Measured", "Expected"]
        # Inside the drawing, right of the unit label.
        layout = WIDE if svg is wide else NARROW
        xs = [float(t.get("x") or 0) for t in legend[0].iter(f"{SVG}text")]
        assert min(xs) > 40
        assert max(xs) + 8 * layout.font_size * 0.6 <= layout.width - layout.right + 0.5


def test_no_expected_series_no_marks_and_no_legend() -> None:
    markup = render_chart(_days([10_000.0, 2_000.0]), "1d", AMS, title="t")
    assert 'class="expected' not in markup
    assert 'class="legend"' not in markup


def test_short_intervals_draw_the_expected_energy_as_a_dashed_line() -> None:
    start = datetime(2025, 6, 15, 10, tzinfo=UTC)
    values = [(100.0, 120.0), (200.0, 210.0), (None, None), (300.0, 280.0), (250.0, None)]
    points = [
        ChartPoint(start + timedelta(hours=i), energy, expected)
        for i, (energy, expected) in enumerate(values)
    ]
    wide, _ = _svgs(render_chart(points, "1h", AMS, title="t"))
    lines = [e for e in wide.iter(f"{SVG}polyline") if e.get("class") == "expected-line"]
    dots = [e for e in wide.iter(f"{SVG}circle") if e.get("class") == "expected-dot"]
    # Broken where nothing is expected: two points, then one alone.
    assert len(lines) == 1
    assert len((lines[0].get("points") or "").split()) == 2
    assert len(dots) == 1
    points_rects = [r for r in wide.iter(f"{SVG}rect") if r.get("class") == "point"]
    assert [r.get("data-expected-wh") for r in points_rects] == ["120.0", "210.0", "280.0", ""]
