"""The report's charts as inline SVG, written from plain data.

Four small chart types cover the report: a scatter with labelled points and optional interval
bars (process score against pass@1, one point per group), a bump chart (each group's rank under
two scores, joined by a line), and an interval ("forest") chart (an estimate with its interval
per row: pass@1 per group, agreement per grader pair). They are written by hand rather than
with a plotting library: each is a few dozen elements, the bytes are a pure function of the data
(no ids, dates or font subsets to pin down), labels stay real ``<text>`` (searchable, selectable,
and escaped like all other text from logs), and the report needs no plotting dependency.

Every label passes through :func:`~procgrade.engine.reporting.markup.esc`; coordinates are printed with one
decimal. A chart with nothing to draw returns ``""`` and the caller says so in words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from procgrade.engine.reporting.markup import esc

__all__ = ["PALETTE", "BumpRow", "IntervalRow", "Point", "RunPoint", "bump_chart", "interval_chart", "jitter",
           "run_scatter", "scatter_chart"]

#: Colour-blind-safe colours (Okabe and Ito), assigned to groups in the order given.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_FONT = 12
_CHAR = 6.6  # average glyph width at 12px in a sans-serif face: enough to lay labels out
_LABEL_MAX = 36


@dataclass(frozen=True)
class Point:
    """One labelled point; ``y_low``/``y_high`` draw a vertical interval bar."""

    label: str
    x: float | None
    y: float | None
    y_low: float | None = None
    y_high: float | None = None


@dataclass(frozen=True)
class IntervalRow:
    """One row of an interval chart: an estimate in ``low..high``; ``text`` is printed at the right."""

    label: str
    estimate: float | None
    low: float | None
    high: float | None
    text: str = ""


@dataclass(frozen=True)
class BumpRow:
    """One group's rank under the left and the right score (1 = best; ties may be fractional)."""

    label: str
    left: float | None
    right: float | None


@dataclass(frozen=True)
class RunPoint:
    """One run in a per-run scatter: ``x``, ``y`` already jittered where the caller wants it; ``label`` is the
    tooltip (the full run id and its values), ``group`` picks the colour and the legend entry."""

    label: str
    group: str
    x: float
    y: float


def jitter(key: str, spread: float) -> float:
    """A deterministic offset in [-spread, spread] from ``key`` (sha256): the same run always lands on the
    same spot, so overlapping points separate without making the page depend on a random draw."""
    import hashlib

    fraction = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2**64
    return (2 * fraction - 1) * spread


def _n(value: float) -> str:
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _clip(label: str, limit: int = _LABEL_MAX) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def _width(text: str) -> float:
    return len(text) * _CHAR


def _svg(width: float, height: float, title: str, body: list[str], css_class: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(css_class)}" role="img" '
            f'width="{_n(width)}" height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" '
            f'font-size="{_FONT}"><title>{esc(title)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, *, anchor: str = "start", extra: str = "") -> str:
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{extra}>{esc(text)}</text>')


def _labelled(label: str, shown: str, inner: str) -> str:
    """A group carrying the full label as its tooltip (the shown text may be clipped)."""
    return f"<g><title>{esc(label)}</title>{inner}</g>" if shown != label else f"<g>{inner}</g>"


def _in(value: float | None, domain: tuple[float, float]) -> bool:
    return value is not None and domain[0] <= value <= domain[1]


def _ticks(domain: tuple[float, float], count: int = 4) -> list[float]:
    low, high = domain
    return [low + (high - low) * i / count for i in range(count + 1)]


def _tick_text(value: float, percent: bool) -> str:
    return f"{value * 100:.0f}%" if percent else f"{value:.2f}"


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plot:
    """The plotting rectangle of an x/y chart and the map from data values to its pixels."""

    left: float
    top: float
    width: float
    height: float
    x_domain: tuple[float, float]
    y_domain: tuple[float, float]

    def px(self, x: float) -> float:
        return self.left + (x - self.x_domain[0]) / (self.x_domain[1] - self.x_domain[0]) * self.width

    def py(self, y: float) -> float:
        return self.top + self.height - (y - self.y_domain[0]) / (self.y_domain[1] - self.y_domain[0]) * self.height

    def axes(self, x_ticks: Sequence[tuple[float, str]], y_ticks: Sequence[tuple[float, str]], x_label: str,
             y_label: str, y_label_x: int) -> list[str]:
        """The frame, grid lines at the ticks, tick texts and both axis labels (the y label rotated)."""
        left, top, plot_w, plot_h = self.left, self.top, self.width, self.height
        body = [(f'<rect class="plot" x="{_n(left)}" y="{_n(top)}" width="{_n(plot_w)}" height="{_n(plot_h)}" '
                 'fill="none" stroke="#999"/>')]
        for value, name in x_ticks:
            x = self.px(value)
            body.append(f'<line x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(top + plot_h)}" stroke="#eee"/>')
            body.append(_text(x, top + plot_h + 16, name, anchor="middle"))
        for value, name in y_ticks:
            y = self.py(value)
            body.append(f'<line x1="{_n(left)}" y1="{_n(y)}" x2="{_n(left + plot_w)}" y2="{_n(y)}" stroke="#eee"/>')
            body.append(_text(left - 6, y + 4, name, anchor="end"))
        body.append(_text(left + plot_w / 2, top + plot_h + 38, x_label, anchor="middle", extra=' class="axis-label"'))
        body.append(_text(y_label_x, top + plot_h / 2, y_label, anchor="middle",
                          extra=f' class="axis-label" transform="rotate(-90 {y_label_x} {_n(top + plot_h / 2)})"'))
        return body


def _numeric_ticks(domain: tuple[float, float], percent: bool) -> list[tuple[float, str]]:
    return [(t, _tick_text(t, percent)) for t in _ticks(domain)]


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str,
                  x_domain: tuple[float, float] = (0.0, 1.0), y_domain: tuple[float, float] = (0.0, 1.0),
                  x_percent: bool = False, y_percent: bool = True) -> str:
    """Labelled points (x against y) with their y intervals; points outside the domains are left out."""
    shown = [p for p in points if _in(p.x, x_domain) and _in(p.y, y_domain)]
    if not shown:
        return ""
    left, top, plot_w, plot_h = 64.0, 24.0, 380.0, 300.0
    label_room = min(_LABEL_MAX, max(len(p.label) for p in shown)) * _CHAR + 16
    width, height = left + plot_w + label_room, top + plot_h + 52

    plot = _Plot(left, top, plot_w, plot_h, x_domain, y_domain)
    px, py = plot.px, plot.py
    body = plot.axes(_numeric_ticks(x_domain, x_percent), _numeric_ticks(y_domain, y_percent), x_label, y_label, 16)
    placed: list[tuple[float, float]] = []
    for index, point in enumerate(shown):
        assert point.x is not None and point.y is not None
        colour = PALETTE[index % len(PALETTE)]
        x, y = px(point.x), py(point.y)
        if _in(point.y_low, y_domain) and _in(point.y_high, y_domain):
            assert point.y_low is not None and point.y_high is not None
            body.append(f'<line class="interval" x1="{_n(x)}" y1="{_n(py(point.y_low))}" x2="{_n(x)}" '
                        f'y2="{_n(py(point.y_high))}" stroke="{colour}" stroke-opacity="0.6" stroke-width="2"/>')
        body.append(f'<circle class="point" cx="{_n(x)}" cy="{_n(y)}" r="5" fill="{colour}"/>')
        label = _clip(point.label)
        label_y = y + 4
        while any(abs(label_y - py_) < 13 and abs(x - px_) < _width(label) for px_, py_ in placed):
            label_y += 13  # nudge down past labels already placed near this point
        placed.append((x, label_y))
        body.append(_labelled(point.label, label, _text(x + 8, label_y, label, extra=f' fill="{colour}"')))
    return _svg(width, height, title, body, "chart scatter")


def bump_chart(rows: Sequence[BumpRow], *, title: str, left_label: str, right_label: str) -> str:
    """Each group's place under two rankings (best at the top), joined by a line; crossing lines
    are rank flips. Groups tied on a rank take adjacent places (by label), each printed with its rank."""
    shown = [r for r in rows if r.left is not None or r.right is not None]
    if not shown:
        return ""

    def places(side: str) -> dict[int, int]:
        ranked = sorted((i for i, r in enumerate(shown) if getattr(r, side) is not None),
                        key=lambda i: (getattr(shown[i], side), shown[i].label))
        return {i: place for place, i in enumerate(ranked)}

    left_places, right_places = places("left"), places("right")
    slots = max(len(left_places), len(right_places))
    label_w = min(_LABEL_MAX, max(len(r.label) for r in shown)) * _CHAR + 48
    top, step, gap = 40.0, 24.0, 200.0
    x_left, x_right = label_w, label_w + gap
    width, height = x_right + label_w, top + (slots - 1) * step + 24

    def py(place: int) -> float:
        return top + place * step

    bottom = py(slots - 1) + 10
    body = [_text(x_left, 18, left_label, anchor="middle", extra=' class="axis-label"'),
            _text(x_right, 18, right_label, anchor="middle", extra=' class="axis-label"'),
            f'<line x1="{_n(x_left)}" y1="{_n(top - 10)}" x2="{_n(x_left)}" y2="{_n(bottom)}" stroke="#ccc"/>',
            f'<line x1="{_n(x_right)}" y1="{_n(top - 10)}" x2="{_n(x_right)}" y2="{_n(bottom)}" stroke="#ccc"/>']
    for index, row in enumerate(shown):
        colour = PALETTE[index % len(PALETTE)]
        label = _clip(row.label)
        parts = []
        if index in left_places and index in right_places:
            parts.append(f'<line class="bump" x1="{_n(x_left)}" y1="{_n(py(left_places[index]))}" x2="{_n(x_right)}" '
                         f'y2="{_n(py(right_places[index]))}" stroke="{colour}" stroke-width="2.5"/>')
        for side, rank, place, x, anchor, dx in (
                ("left", row.left, left_places.get(index), x_left, "end", -10),
                ("right", row.right, right_places.get(index), x_right, "start", 10)):
            if rank is None or place is None:
                continue
            parts.append(f'<circle class="rank {side}" cx="{_n(x)}" cy="{_n(py(place))}" r="5" fill="{colour}"/>')
            parts.append(_text(x + dx, py(place) + 4, f"{label} ({rank:g})", anchor=anchor, extra=f' fill="{colour}"'))
        body.append(_labelled(row.label, label, "".join(parts)))
    return _svg(width, height, title, body, "chart bump")


def interval_chart(rows: Sequence[IntervalRow], *, title: str, axis_label: str,
                   domain: tuple[float, float] = (0.0, 1.0), percent: bool = True,
                   reference: float | None = None) -> str:
    """One row per estimate: a dot at the estimate and a bar over its interval, the label at the
    left and ``text`` at the right; ``reference`` draws a dashed vertical line (e.g. chance, 0)."""
    shown = [r for r in rows if _in(r.estimate, domain)]
    if not shown:
        return ""
    label_w = min(_LABEL_MAX, max(len(r.label) for r in shown)) * _CHAR + 16
    text_w = max(len(r.text) for r in shown) * _CHAR + 16
    left, top, plot_w, step = label_w, 16.0, 320.0, 24.0
    width, height = left + plot_w + text_w, top + len(shown) * step + 44

    def px(x: float) -> float:
        return left + (x - domain[0]) / (domain[1] - domain[0]) * plot_w

    bottom = top + len(shown) * step
    body = []
    for t in _ticks(domain):
        body.append(f'<line x1="{_n(px(t))}" y1="{_n(top)}" x2="{_n(px(t))}" y2="{_n(bottom)}" stroke="#eee"/>')
        body.append(_text(px(t), bottom + 16, _tick_text(t, percent), anchor="middle"))
    body.append(f'<line x1="{_n(left)}" y1="{_n(bottom)}" x2="{_n(left + plot_w)}" y2="{_n(bottom)}" stroke="#999"/>')
    if _in(reference, domain):
        assert reference is not None
        body.append(f'<line class="reference" x1="{_n(px(reference))}" y1="{_n(top)}" x2="{_n(px(reference))}" '
                    f'y2="{_n(bottom)}" stroke="#666" stroke-dasharray="4 3"/>')
    body.append(_text(left + plot_w / 2, bottom + 36, axis_label, anchor="middle", extra=' class="axis-label"'))
    for index, row in enumerate(shown):
        assert row.estimate is not None
        colour = PALETTE[index % len(PALETTE)]
        y = top + index * step + step / 2
        label = _clip(row.label)
        parts = [_text(left - 8, y + 4, label, anchor="end")]
        if _in(row.low, domain) and _in(row.high, domain):
            assert row.low is not None and row.high is not None
            parts.append(f'<line class="interval" x1="{_n(px(row.low))}" y1="{_n(y)}" x2="{_n(px(row.high))}" '
                         f'y2="{_n(y)}" stroke="{colour}" stroke-width="3" stroke-opacity="0.6"/>')
        parts.append(f'<circle class="estimate" cx="{_n(px(row.estimate))}" cy="{_n(y)}" r="5" fill="{colour}"/>')
        if row.text:
            parts.append(_text(left + plot_w + 10, y + 4, row.text))
        body.append(_labelled(row.label, label, "".join(parts)))
    return _svg(width, height, title, body, "chart intervals")


def run_scatter(points: Sequence[RunPoint], *, title: str, x_label: str, y_label: str,
                x_domain: tuple[float, float] = (0.0, 1.0), y_domain: tuple[float, float] = (0.0, 1.0),
                y_ticks: Sequence[tuple[float, str]] | None = None) -> str:
    """One small circle per run, coloured by group, with a legend; each circle carries its label as a tooltip.
    ``y_ticks`` replaces the numeric y ticks with named ones (e.g. 0 = unresolved, 1 = resolved)."""
    shown = [p for p in points if _in(p.x, x_domain) and _in(p.y, y_domain)]
    if not shown:
        return ""
    groups = sorted({p.group for p in shown})
    colour = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    left, top, plot_w, plot_h = 96.0, 24.0, 420.0, 260.0
    legend_w = min(_LABEL_MAX, max(len(g) for g in groups)) * _CHAR + 40
    width, height = left + plot_w + legend_w, max(top + plot_h + 52, top + 18 * len(groups) + 20)

    plot = _Plot(left, top, plot_w, plot_h, x_domain, y_domain)
    px, py = plot.px, plot.py
    body = plot.axes(_numeric_ticks(x_domain, False), y_ticks if y_ticks is not None else _numeric_ticks(y_domain, False),
                     x_label, y_label, 14)
    for point in shown:
        body.append(f'<circle class="run-point" cx="{_n(px(point.x))}" cy="{_n(py(point.y))}" r="4" '
                    f'fill="{colour[point.group]}" fill-opacity="0.75"><title>{esc(point.label)}</title></circle>')
    for index, group in enumerate(groups):
        y = top + 8 + index * 18
        label = _clip(group)
        body.append(_labelled(group, label,
                              f'<circle class="legend" cx="{_n(left + plot_w + 16)}" cy="{_n(y)}" r="5" '
                              f'fill="{colour[group]}"/>' + _text(left + plot_w + 26, y + 4, label)))
    return _svg(width, height, title, body, "chart runs")
