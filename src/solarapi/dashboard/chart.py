"""The production chart, drawn server-side as SVG (no charting script in the browser).

Bars for calendar buckets (days, weeks, months), a line for the short UTC buckets (15m, 30m,
1h). Buckets without a reading are gaps, never zero: a bar slot gets a light "no data"
marker and a line is broken there. The chart is drawn twice, for wide and for phone-sized
screens (CSS shows one), because text in a scaled-down wide SVG becomes unreadably small.

A second series, the energy the performance model expected over the same quarter-hours
(`ChartPoint.expected_wh`), is drawn over the first: a dark level mark across each bar, or
a dashed line beside the measured one, with a legend in the top right corner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from markupsafe import Markup, escape

BAR_INTERVALS = frozenset({"1d", "1w", "1M"})


@dataclass(frozen=True, slots=True)
class ChartPoint:
    start: datetime  # aware, UTC
    energy_wh: float | None
    # What the model expected over the quarter-hours that have a reading (None: nothing).
    expected_wh: float | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    font_size: int
    max_labels: int
    css_class: str


WIDE = Layout(800, 310, 64, 12, 26, 34, 12, 9, "chart-wide")
NARROW = Layout(360, 280, 48, 8, 26, 30, 13, 4, "chart-narrow")


@dataclass(frozen=True, slots=True)
class Scale:
    unit: str  # "Wh" or "kWh"
    divisor: float
    top: float  # axis maximum in `unit`
    step: float


_FINEST_STEP = 0.01


def energy_scale(values: Sequence[float | None]) -> Scale:
    """A y axis from 0 to a round number above the largest value, in Wh or kWh."""
    largest = max((v for v in values if v is not None), default=0.0)
    unit, divisor = ("kWh", 1000.0) if largest >= 1000 else ("Wh", 1.0)
    top_value = largest / divisor
    if top_value <= 0:
        return Scale(unit, divisor, 1.0, 0.25)
    # Tick labels show at most two decimals, so no step is finer than 0.01: a finer one would
    # label every tick "0.00", and a subnormal value's quarter underflows to 0 (log10(0)).
    raw_step = max(top_value / 4, _FINEST_STEP)
    magnitude = 10 ** math.floor(math.log10(raw_step))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw_step)
    return Scale(unit, divisor, step * max(1, math.ceil(top_value / step - 1e-9)), step)


def format_energy(value_wh: float | None) -> str:
    if value_wh is None:
        return "no data"
    if abs(value_wh) >= 1000:
        return f"{value_wh / 1000:,.2f} kWh"
    return f"{value_wh:,.1f} Wh"


def bucket_label(start: datetime, interval: str, tz: ZoneInfo, *, long: bool = False) -> str:
    local = start.astimezone(tz)
    if interval == "1M":
        return local.strftime("%B %Y" if long else "%b %Y")
    if interval == "1w":
        return ("Week of " if long else "") + f"{local.day} {local.strftime('%b')}"
    if interval == "1d":
        return (local.strftime("%a ") if long else "") + f"{local.day} {local.strftime('%b')}"
    if long:
        return f"{local.day} {local.strftime('%b %H:%M')}"
    return local.strftime("%H:%M")


def _tick_text(value: float, step: float) -> str:
    decimals = 0 if step >= 1 else (1 if step * 10 >= 1 else 2)
    return f"{value:,.{decimals}f}"


def render_chart(
    points: Sequence[ChartPoint], interval: str, tz: ZoneInfo, *, title: str
) -> Markup:
    """Both variants of the chart, as markup to place in a <figure>."""
    # Labels and data attributes are the same in both variants: build them once.
    marks = [_mark(point, interval, tz) for point in points]
    return Markup("").join(
        _render(points, marks, interval, tz, layout, title) for layout in (WIDE, NARROW)
    )


def _render(
    points: Sequence[ChartPoint],
    marks: Sequence[tuple[str, Markup]],
    interval: str,
    tz: ZoneInfo,
    layout: Layout,
    title: str,
) -> Markup:
    scale = energy_scale([p.energy_wh for p in points] + [p.expected_wh for p in points])
    expected = any(p.expected_wh is not None for p in points)
    plot_w = layout.width - layout.left - layout.right
    plot_h = layout.height - layout.top - layout.bottom
    base_y = layout.top + plot_h
    count = max(len(points), 1)
    slot = plot_w / count

    def y_of(value_wh: float) -> float:
        return base_y - (value_wh / scale.divisor) / scale.top * plot_h

    parts: list[str] = [
        f'<svg class="{layout.css_class}" viewBox="0 0 {layout.width} {layout.height}" '
        f'role="img" aria-label="{escape(title)}" font-size="{layout.font_size}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    # Horizontal grid lines with the axis values.
    ticks = round(scale.top / scale.step)
    for i in range(ticks + 1):
        value = scale.step * i
        y = base_y - value / scale.top * plot_h
        parts.append(
            f'<line class="grid" x1="{layout.left}" x2="{layout.width - layout.right}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text x="{layout.left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_tick_text(value, scale.step)}</text>"
        )
    parts.append(f'<text x="4" y="{layout.font_size}" class="unit">{scale.unit}</text>')
    if interval in BAR_INTERVALS:
        parts.extend(_bars(points, marks, layout, slot, base_y, y_of))
        if expected:
            parts.extend(_expected_levels(points, layout, slot, y_of))
    else:
        parts.extend(_line(points, marks, layout, slot, base_y, y_of))
        if expected:  # over the measured line (dashed: both stay visible where they agree)
            parts.extend(_expected_line(points, layout, slot, y_of))
    if expected:
        parts.extend(_legend(layout, bars=interval in BAR_INTERVALS))
    parts.append(
        f'<line class="axis" x1="{layout.left}" x2="{layout.width - layout.right}" '
        f'y1="{base_y}" y2="{base_y}"/>'
    )
    parts.extend(_x_labels(points, interval, tz, layout, slot, base_y))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every interpolated text is escaped above


def _mark(point: ChartPoint, interval: str, tz: ZoneInfo) -> tuple[str, Markup]:
    """The data attributes of a bar or point (exact API value, for tests and the readout)
    and its human label."""
    text = f"{bucket_label(point.start, interval, tz, long=True)}: {format_energy(point.energy_wh)}"
    if point.expected_wh is not None:
        text += f", expected {format_energy(point.expected_wh)}"
    label = escape(text)
    energy = "" if point.energy_wh is None else repr(point.energy_wh)
    expected = "" if point.expected_wh is None else repr(point.expected_wh)
    start = point.start.isoformat().replace("+00:00", "Z")
    attrs = (
        f'data-start="{start}" data-energy-wh="{energy}" data-expected-wh="{expected}" '
        f'data-label="{label}"'
    )
    return attrs, label


def _bars(
    points: Sequence[ChartPoint],
    marks: Sequence[tuple[str, Markup]],
    layout: Layout,
    slot: float,
    base_y: float,
    y_of: Callable[[float], float],
) -> list[str]:
    parts: list[str] = []
    gap = min(slot * 0.2, 6.0) if slot > 3 else 0.0
    width = max(slot - gap, 0.5)
    for i, point in enumerate(points):
        x = layout.left + i * slot + gap / 2
        attrs, label = marks[i]
        if point.energy_wh is None:
            parts.append(
                f'<rect class="gap" x="{x:.2f}" y="{base_y - 4}" width="{width:.2f}" height="4" '
                f"{attrs}><title>{label}</title></rect>"
            )
            continue
        top = y_of(point.energy_wh)
        parts.append(
            f'<rect class="bar" x="{x:.2f}" y="{top:.2f}" width="{width:.2f}" '
            f'height="{max(base_y - top, 0):.2f}" {attrs}><title>{label}</title></rect>'
        )
    return parts


def _line(
    points: Sequence[ChartPoint],
    marks: Sequence[tuple[str, Markup]],
    layout: Layout,
    slot: float,
    base_y: float,
    y_of: Callable[[float], float],
) -> list[str]:
    parts: list[str] = []
    runs: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for i, point in enumerate(points):
        if point.energy_wh is None:
            if current:
                runs.append(current)
            current = []
            continue
        current.append((layout.left + (i + 0.5) * slot, y_of(point.energy_wh)))
    if current:
        runs.append(current)
    for run in runs:
        coords = " ".join(f"{x:.2f},{y:.2f}" for x, y in run)
        first_x, last_x = run[0][0], run[-1][0]
        parts.append(
            f'<polygon class="area" points="{first_x:.2f},{base_y} {coords} {last_x:.2f},{base_y}"/>'
        )
        if len(run) == 1:
            x, y = run[0]
            parts.append(f'<circle class="dot" cx="{x:.2f}" cy="{y:.2f}" r="2.5"/>')
        else:
            parts.append(f'<polyline class="line" points="{coords}"/>')
    # Missing buckets: a light marker on the axis, so gaps are visible, not drawn as zero.
    for i, point in enumerate(points):
        if point.energy_wh is None:
            x = layout.left + i * slot
            attrs, label = marks[i]
            parts.append(
                f'<rect class="gap" x="{x:.2f}" y="{base_y - 4}" width="{max(slot, 0.5):.2f}" '
                f'height="4" {attrs}><title>{label}</title></rect>'
            )
    # Invisible hover targets with the exact values (a <title> shows as a tooltip).
    for i, point in enumerate(points):
        if point.energy_wh is None:
            continue
        x = layout.left + i * slot
        attrs, label = marks[i]
        parts.append(
            f'<rect class="point" x="{x:.2f}" y="{layout.top}" width="{max(slot, 0.5):.2f}" '
            f'height="{base_y - layout.top:.2f}" {attrs}><title>{label}</title></rect>'
        )
    return parts


def _expected_levels(
    points: Sequence[ChartPoint],
    layout: Layout,
    slot: float,
    y_of: Callable[[float], float],
) -> list[str]:
    """The expected energy of each bar as a level mark across its slot (drawn over the bars,
    so a bar short of its mark is visibly below expectation). Not a hover target: the bar's
    own title and readout carry both values."""
    parts: list[str] = []
    inset = min(slot * 0.05, 2.0)
    for i, point in enumerate(points):
        if point.expected_wh is None:
            continue
        y = y_of(point.expected_wh)
        x1, x2 = layout.left + i * slot + inset, layout.left + (i + 1) * slot - inset
        parts.append(
            f'<line class="expected" x1="{x1:.2f}" x2="{x2:.2f}" y1="{y:.2f}" y2="{y:.2f}" '
            f'data-expected-wh="{point.expected_wh!r}"/>'
        )
    return parts


def _expected_line(
    points: Sequence[ChartPoint],
    layout: Layout,
    slot: float,
    y_of: Callable[[float], float],
) -> list[str]:
    """The expected energy as a dashed line, broken where nothing is expected."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, point in enumerate(points):
        if point.expected_wh is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((layout.left + (i + 0.5) * slot, y_of(point.expected_wh)))
    parts: list[str] = []
    for run in runs:
        if len(run) == 1:
            x, y = run[0]
            parts.append(f'<circle class="expected-dot" cx="{x:.2f}" cy="{y:.2f}" r="2"/>')
        elif run:
            coords = " ".join(f"{x:.2f},{y:.2f}" for x, y in run)
            parts.append(f'<polyline class="expected-line" points="{coords}"/>')
    return parts


def _legend(layout: Layout, *, bars: bool) -> list[str]:
    """Which mark is which, in the top right corner (above the plot, beside the unit)."""
    size = layout.font_size
    y = size
    right = layout.width - layout.right
    # Text is measured at ~0.6 em a character in the chart's sans-serif (an upper bound).
    text_w = round(size * 0.6 * len("Measured"))
    expected_x = right - text_w
    measured_x = expected_x - 20 - 14 - text_w - 4 - size
    swatch = (
        f'<rect class="legend-bar" x="{measured_x}" y="{y - size * 0.75:.1f}" width="{size}" '
        f'height="{size * 0.75:.1f}"/>'
        if bars
        else f'<line class="legend-line" x1="{measured_x}" x2="{measured_x + size}" '
        f'y1="{y - size * 0.35:.1f}" y2="{y - size * 0.35:.1f}"/>'
    )
    mark = "legend-expected" if bars else "legend-expected-line"
    return [
        '<g class="legend">',
        swatch,
        f'<text x="{measured_x + size + 4}" y="{y}">Measured</text>',
        f'<line class="{mark}" x1="{expected_x - 20}" x2="{expected_x - 4}" '
        f'y1="{y - size * 0.35:.1f}" y2="{y - size * 0.35:.1f}"/>',
        f'<text x="{expected_x}" y="{y}">Expected</text>',
        "</g>",
    ]


def _x_labels(
    points: Sequence[ChartPoint],
    interval: str,
    tz: ZoneInfo,
    layout: Layout,
    slot: float,
    base_y: float,
) -> list[str]:
    parts: list[str] = []
    for i in label_indices(points, interval, tz, layout.max_labels):
        x = layout.left + (i + 0.5) * slot
        local = points[i].start.astimezone(tz)
        at_midnight = local.hour == 0 and local.minute == 0
        label = bucket_label(points[i].start, "1d" if at_midnight else interval, tz)
        parts.append(
            f'<text x="{x:.1f}" y="{base_y + layout.font_size + 8}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return parts


def label_indices(
    points: Sequence[ChartPoint], interval: str, tz: ZoneInfo, max_labels: int
) -> list[int]:
    """Which buckets get an x-axis label: round local hours (every 1, 2, 3, 6 or 12 h) or
    midnights for the short intervals, evenly spaced buckets for calendar ones."""
    if not points:
        return []
    if interval not in BAR_INTERVALS:
        local = [p.start.astimezone(tz) for p in points]
        for hours in (1, 2, 3, 6, 12):
            chosen = [i for i, t in enumerate(local) if t.minute == 0 and t.hour % hours == 0]
            if 2 <= len(chosen) <= max_labels:
                return chosen
        midnights = [i for i, t in enumerate(local) if t.hour == 0 and t.minute == 0]
        if midnights:
            return midnights[:: math.ceil(len(midnights) / max_labels)]
    every = max(1, math.ceil(len(points) / max_labels))
    return list(range(0, len(points), every))
