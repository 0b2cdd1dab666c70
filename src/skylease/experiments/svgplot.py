"""Step plots stacked on one time axis, written as SVG text: the figure of every ``skylease run``.

Why not matplotlib: the report is on the path of every run, and importing matplotlib and drawing
one three-panel PNG cost 0.5 s, half the time of a 2,000-task job of ``true`` (issue 25). A few
polylines, ticks and labels need none of it (about 2 ms here); browsers and Markdown viewers show
SVG as they show PNG. It needs no numpy either: a run of commands never imports it (0.1-0.2 s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

#: matplotlib's default colour cycle, so the figure looks like the project's others.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
WIDTH, PANEL_H, TOP, BOTTOM, LEFT, RIGHT = 700, 200, 40, 45, 75, 15


@dataclass
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[float]
    dashed: bool = False
    colour: str | None = None


@dataclass
class Panel:
    ylabel: str
    series: list[Series] = field(default_factory=list)
    hline: tuple[str, float] | None = None  # (label, y): a dotted red line (a budget)
    integer: bool = False


def nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not hi > lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(n, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:,.3g}"


def _steps(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    """The corners of a post-step line through (x, y)."""
    xs = [float(v) for v in x for _ in (0, 1)][1:]
    ys = [float(v) for v in y for _ in (0, 1)][:-1]
    return xs, ys


def step_panels(panels: Sequence[Panel], xlabel: str, title: str, x_max: float) -> str:
    """An SVG document: ``panels`` stacked, sharing an x axis from 0 to ``x_max``."""
    height = TOP + PANEL_H * len(panels) + BOTTOM
    plot_w = WIDTH - LEFT - RIGHT
    x_max = x_max if x_max > 0 else 1.0
    xt = nice_ticks(0.0, x_max)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, sans-serif" font-size="11">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="12">{escape(title)}</text>']
    for i, panel in enumerate(panels):
        top = TOP + i * PANEL_H
        h = PANEL_H - 10
        ys = [float(max(s.y)) for s in panel.series if len(s.y)]
        if panel.hline is not None:
            ys.append(panel.hline[1])
        y_max = max(ys, default=0.0) * 1.35 or 1.0  # room for the legend above the lines

        def px(v: float, top: float = top, h: float = h, y_max: float = y_max) -> float:
            return top + h - float(v) / y_max * h

        parts.append(f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{h}" fill="none" '
                     'stroke="black"/>')
        for t in nice_ticks(0.0, y_max / 1.35, 4, panel.integer):
            y = float(px(t))
            parts.append(f'<line x1="{LEFT - 4}" x2="{LEFT}" y1="{y:.1f}" y2="{y:.1f}" stroke="black"/>'
                         f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
        for t in xt:
            x = LEFT + t / x_max * plot_w
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + h}" y2="{top + h + 4}" '
                         'stroke="black"/>')
            if i == len(panels) - 1:
                parts.append(f'<text x="{x:.1f}" y="{top + h + 16}" text-anchor="middle">{_fmt(t)}</text>')
        parts.append(f'<text transform="translate(16,{top + h / 2:.1f}) rotate(-90)" '
                     f'text-anchor="middle">{escape(panel.ylabel)}</text>')
        legend = []
        for j, s in enumerate(panel.series):
            colour = s.colour or COLOURS[j % len(COLOURS)]
            xs, yv = _steps(s.x, s.y)
            pts = " ".join(f"{LEFT + a / x_max * plot_w:.1f},{b:.1f}"
                           for a, b in zip(xs, map(px, yv), strict=True))
            dash = ' stroke-dasharray="6,3"' if s.dashed else ""
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" '
                         f'stroke-width="1.5"{dash}/>')
            legend.append((s.label, colour, dash))
        if panel.hline is not None:
            y = float(px(panel.hline[1]))
            parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="red" '
                         'stroke-dasharray="2,3"/>')
            legend.append((panel.hline[0], "red", ' stroke-dasharray="2,3"'))
        for k, (label, colour, dash) in enumerate(legend):
            y = top + 14 + 14 * k
            parts.append(f'<line x1="{LEFT + 8}" x2="{LEFT + 30}" y1="{y - 4}" y2="{y - 4}" '
                         f'stroke="{colour}" stroke-width="1.5"{dash}/>'
                         f'<text x="{LEFT + 34}" y="{y}">{escape(label)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{height - 8}" text-anchor="middle">'
                 f'{escape(xlabel)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
