"""PDF files: a real document laid out with reportlab (title block, chart, tables, "page X of
Y" on every page), with the chart drawn by matplotlib.

Why reportlab and not matplotlib's PdfPages: reportlab flows text and tables across as many
pages as the period needs (repeating table headers), keeps the text real and searchable, and
lays out hundreds of table pages in a few seconds; PdfPages would draw every table page as a
figure by hand. matplotlib draws the chart (a PNG at print resolution) through its
object-oriented API, which is safe off the main thread, where the runner renders.

The font is DejaVu Sans from matplotlib's own data files, so names in any Latin, Greek or
Cyrillic script print correctly without a font download.
"""

from __future__ import annotations

import io
import math
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure
from reportlab import rl_config
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4, landscape
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    Image,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from solarapi.reports.document import Cell, Chart, ReportContent
from solarapi.reports.document import Table as ContentTable

FONT = "DejaVuSans"
FONT_BOLD = "DejaVuSans-Bold"
MARGIN = 16 * mm

ROW_HEIGHT = 11.5
FEW_BARS = 14
CHART_MAX_HEIGHT = 75 * mm
HEADING_ROOM = 40 * mm
SHORT_COLUMN = 70.0
# reportlab pads cells 6 pt left and right; a little more so measured text never touches.
CELL_PADDING = 14.0
MAX_CELL_CHARS = 48
ACCENT = colors.HexColor("#b45309")
GRID = colors.HexColor("#d6d3d1")

# Binary (zlib) page streams instead of ASCII85-armoured ones: a quarter smaller and without
# reportlab's pure-Python encoder, which was a fifth of the time of a 350-page report.
rl_config.useA85 = 0

_fonts_lock = threading.Lock()
_fonts_ready = False


def _register_fonts() -> None:
    global _fonts_ready
    with _fonts_lock:
        if _fonts_ready:
            return
        fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
        pdfmetrics.registerFont(TTFont(FONT, str(fonts / "DejaVuSans.ttf")))
        pdfmetrics.registerFont(TTFont(FONT_BOLD, str(fonts / "DejaVuSans-Bold.ttf")))
        _fonts_ready = True


def _styles() -> dict[str, ParagraphStyle]:
    return {
        "title": ParagraphStyle("title", fontName=FONT_BOLD, fontSize=20, leading=24,
                                spaceAfter=4 * mm, textColor=colors.HexColor("#1c1917")),
        "h2": ParagraphStyle("h2", fontName=FONT_BOLD, fontSize=12, leading=15,
                             spaceBefore=5 * mm, spaceAfter=2 * mm),
        "th": ParagraphStyle("th", fontName=FONT_BOLD, fontSize=7.5, leading=9),
        "th_right": ParagraphStyle("th_right", fontName=FONT_BOLD, fontSize=7.5, leading=9,
                                   alignment=TA_RIGHT),
        "cell": ParagraphStyle("cell", fontName=FONT, fontSize=7.5, leading=9,
                               splitLongWords=True),
        "body": ParagraphStyle("body", fontName=FONT, fontSize=8.5, leading=11),
        "note": ParagraphStyle("note", fontName=FONT, fontSize=7.5, leading=10,
                               textColor=colors.HexColor("#57534e"), spaceBefore=1 * mm),
    }  # fmt: skip


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text(value: Cell, decimals: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:,.{decimals}f}"
    if len(value) > MAX_CELL_CHARS:
        return value[: MAX_CELL_CHARS - 1] + "…"
    return value


def chart_figure(chart: Chart) -> Figure:
    """The chart as a matplotlib figure (laid out, not yet rendered)."""
    figure = Figure(figsize=(7.2, 3.0), dpi=200)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    values = [math.nan if value is None else value for value in chart.y]
    if chart.x and any(value is not None for value in chart.y):
        positions = date2num(chart.x)  # type: ignore[no-untyped-call]
        edge = 0.3 if len(chart.x) < 200 else 0.0
        if len(chart.labels) == len(chart.x) <= FEW_BARS:
            axes.bar(positions, values, width=chart.bar_days, color="#f59e0b",
                     edgecolor="#b45309", linewidth=edge)  # fmt: skip
            # Few bars: label each one with its period, not with clock times between them.
            axes.set_xticks(list(positions), chart.labels, rotation=30 if len(chart.x) > 6 else 0)
        else:
            # Each bar starts at its bucket's start, and the axis ends with the last bar: a
            # margin past it would put a tick on the next period (an October report's axis
            # read "2026-Nov").
            axes.bar(positions, values, width=chart.bar_days, align="edge", color="#f59e0b",
                     edgecolor="#b45309", linewidth=edge)  # fmt: skip
            axes.set_xlim(float(positions[0]), float(positions[-1]) + chart.bar_days)
            locator = AutoDateLocator()  # type: ignore[no-untyped-call]
            axes.xaxis.set_major_locator(locator)
            axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    else:
        axes.text(0.5, 0.5, "No data in this period", ha="center", va="center",
                  transform=axes.transAxes, color="#57534e")  # fmt: skip
        axes.set_xticks([])
    axes.set_title(chart.title, fontsize=9)
    axes.set_ylabel(chart.ylabel, fontsize=8)
    if chart.xlabel:
        axes.set_xlabel(chart.xlabel, fontsize=8)
    axes.tick_params(labelsize=7)
    axes.grid(axis="y", color="#e7e5e4", linewidth=0.5)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    figure.tight_layout()
    return figure


def _chart_png(chart: Chart) -> bytes:
    buffer = io.BytesIO()
    chart_figure(chart).savefig(buffer, format="png")
    return buffer.getvalue()


@dataclass(frozen=True, slots=True)
class _Layout:
    widths: list[float]
    # Cells wider than their column: the table wraps text cells (Paragraphs, measured rows).
    wrap: bool


def _layout(
    texts: list[list[str]], headers: list[str], numeric: list[bool], frame_width: float
) -> _Layout:
    """Column widths from the measured text of the first rows. When the table is too wide for
    the page, numbers keep their width and text columns share what is left, wrapping."""
    sample = texts[:200]
    natural: list[float] = []
    for col, header in enumerate(headers):
        cells = max((pdfmetrics.stringWidth(row[col], FONT, 7.5) for row in sample), default=0)
        word = max(pdfmetrics.stringWidth(part, FONT_BOLD, 7.5) for part in header.split())
        natural.append(max(cells, word) + CELL_PADDING)
    if sum(natural) <= frame_width:
        scale = frame_width / sum(natural)
        return _Layout([width * scale for width in natural], wrap=False)
    # Numbers and short texts keep their width; the long text columns share the rest.
    keeps = [
        is_number or width <= SHORT_COLUMN
        for width, is_number in zip(natural, numeric, strict=True)
    ]
    fixed = sum(width for width, keep in zip(natural, keeps, strict=True) if keep)
    text_total = sum(natural) - fixed
    share = max(frame_width - fixed, 0.0) / text_total if text_total else 1.0
    widths = [width if keep else width * share for width, keep in zip(natural, keeps, strict=True)]
    return _Layout(widths, wrap=True)


def _is_numeric(values: list[Cell]) -> bool:
    """A column of numbers (or percentages), right-aligned and never wrapped."""
    present = [value for value in values if value is not None]
    return bool(present) and all(
        isinstance(value, int | float) or (isinstance(value, str) and value.endswith(" %"))
        for value in present
    )


def _table_flowables(
    table: ContentTable, styles: dict[str, ParagraphStyle], page: tuple[float, float]
) -> list[Flowable]:
    heading = Paragraph(_escape(table.title), styles["h2"])
    if not table.rows:
        return [CondPageBreak(HEADING_ROOM), heading, Paragraph("No rows.", styles["body"])]
    # Money to the cent (a customer's document); the CSV keeps full precision.
    decimals = [2 if "EUR" in name else 3 for name in table.columns]
    texts = [
        [_text(value, places) for value, places in zip(row, decimals, strict=True)]
        for row in table.rows
    ]
    numeric = [
        _is_numeric([row[col] for row in table.rows[:200]]) for col in range(len(table.columns))
    ]
    layout = _layout(texts, table.columns, numeric, page[0] - 2 * MARGIN)
    widths = layout.widths
    headers = [
        Paragraph(_escape(name), styles["th_right" if is_number else "th"])
        for name, is_number in zip(table.columns, numeric, strict=True)
    ]
    commands: list[Any] = [
        ("FONT", (0, 1), (-1, -1), FONT, 7.5),
        ("LINEBELOW", (0, 0), (-1, 0), 0.8, ACCENT),
        ("LINEBELOW", (0, 1), (-1, -1), 0.25, GRID),
        ("TOPPADDING", (0, 0), (-1, -1), 1.6),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 1.6),
        ("VALIGN", (0, 0), (-1, -1), "BOTTOM"),
    ]
    for col, is_number in enumerate(numeric):
        if is_number:
            commands.append(("ALIGN", (col, 1), (col, -1), "RIGHT"))
    rows: list[list[Any]] = list(texts)
    row_heights: list[float] | None = None
    if layout.wrap:
        # Measured rows: only tables too wide for the page (summaries, declarations), which
        # are short; the long per-bucket tables always fit and keep the fast path below.
        cell = styles["cell"]
        rows = [
            [
                text if numeric[col] else Paragraph(_escape(text), cell)
                for col, text in enumerate(row)
            ]
            for row in texts
        ]
        commands[-1] = ("VALIGN", (0, 0), (-1, -1), "TOP")
    else:
        header_lines = max(
            _lines(name, width - CELL_PADDING)
            for name, width in zip(table.columns, widths, strict=True)
        )
        # Fixed heights: reportlab then splits a long table page by page without measuring
        # every remaining cell again (which made an 18,000-row table take minutes).
        row_heights = [header_lines * 9 + 4] + [ROW_HEIGHT] * len(texts)
    body = Table(
        [headers, *rows],
        colWidths=widths,
        rowHeights=row_heights,
        repeatRows=1,
        style=TableStyle(commands),
    )
    # A heading near the bottom of a page moves to the next one with its first rows; the
    # table itself then flows over as many pages as it needs.
    return [CondPageBreak(HEADING_ROOM), heading, body]


def _lines(text: str, width: float) -> int:
    """Lines a bold header needs at `width` (greedy word wrap, as reportlab wraps)."""
    lines, current = 1, 0.0
    space = pdfmetrics.stringWidth(" ", FONT_BOLD, 7.5)
    for word in text.split():
        word_width = pdfmetrics.stringWidth(word, FONT_BOLD, 7.5)
        if current and current + space + word_width > width:
            lines += 1
            current = word_width
        else:
            current += (space if current else 0) + word_width
    return lines


def _canvas_class(footer_left: str) -> type[Canvas]:
    class NumberedCanvas(Canvas):
        """Draws "Page X of Y" once the page count is known: pages are kept until save()."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self._saved_pages: list[dict[str, object]] = []

        def showPage(self) -> None:
            self._saved_pages.append(dict(self.__dict__))
            self._startPage()  # type: ignore[attr-defined]

        def save(self) -> None:
            total = len(self._saved_pages)
            for state in self._saved_pages:
                self.__dict__.update(state)
                self._footer(total)
                super().showPage()
            super().save()

        def _footer(self, total: int) -> None:
            self.saveState()
            self.setFont(FONT, 7)
            self.setFillColor(colors.HexColor("#57534e"))
            self.setStrokeColor(GRID)
            width = float(self._pagesize[0])  # type: ignore[attr-defined]
            self.line(MARGIN, 12 * mm, width - MARGIN, 12 * mm)
            self.drawString(MARGIN, 8 * mm, footer_left)
            self.drawRightString(width - MARGIN, 8 * mm, f"Page {self.getPageNumber()} of {total}")
            self.restoreState()

    return NumberedCanvas


def write_pdf(content: ReportContent, path: Path, generated_at: datetime) -> None:
    _register_fonts()
    styles = _styles()
    page = landscape(A4) if content.landscape else A4
    frame_width = page[0] - 2 * MARGIN
    story: list[Flowable] = [Paragraph(_escape(content.title), styles["title"])]
    facts = Table(
        # Paragraphs, so long values (many system names) wrap instead of being cut.
        [[name, Paragraph(_escape(value), styles["body"])] for name, value in content.facts],
        colWidths=[32 * mm, frame_width - 32 * mm],
        style=TableStyle(
            [
                ("FONT", (0, 0), (0, -1), FONT_BOLD, 8.5),
                ("FONT", (1, 0), (1, -1), FONT, 8.5),
                ("TOPPADDING", (0, 0), (-1, -1), 1.5),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        ),
        hAlign="LEFT",
    )
    story += [facts, Spacer(1, 5 * mm)]
    if content.chart is not None:
        story.append(
            Image(
                io.BytesIO(_chart_png(content.chart)),
                width=min(frame_width, CHART_MAX_HEIGHT * 7.2 / 3.0),
                height=min(frame_width * 3.0 / 7.2, CHART_MAX_HEIGHT),
            )
        )
    story += [Paragraph(_escape(note), styles["note"]) for note in content.notes]
    for table in content.tables:
        story.extend(_table_flowables(table, styles, page))
    document = SimpleDocTemplate(
        str(path),
        pagesize=page,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=18 * mm,
        title=content.title,
        author="Solar Energy Platform API",
        subject=content.title,
        creator="solarapi",
        invariant=False,
    )
    footer = f"{content.title} · generated {generated_at:%Y-%m-%d %H:%M} UTC"
    document.build(story, canvasmaker=_canvas_class(footer))
