"""Small inline SVG charts for the HTML report: bars (stacked, or side by side on a log
axis), and a scatter whose points link to anchors. Written here (a few dozen lines of
SVG) so the report needs no script library and no network."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
    "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
"""Colours of the series, in order (Tableau 10)."""

Formatter = Callable[[float], str]


def _nice_ticks(top: float) -> list[float]:
    """0 and 4-6 round ticks up to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _span_ticks(low: float, high: float) -> list[float]:
    """Round ticks from at most ``low`` to at least ``high`` (``low`` may be above 0)."""
    raw = (high - low) / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(low / step) * step
    n = math.ceil((high - start) / step - 1e-9)
    return [start + i * step for i in range(n + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    lo = math.floor(math.log10(low))
    hi = math.ceil(math.log10(high))
    if hi == lo:
        hi += 1
    return [10.0**k for k in range(lo, hi + 1)]


def bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    fmt: Formatter,
    *,
    axis: str,
    log: bool = False,
    stacked: bool = True,
    limit: float | None = None,
    limit_label: str = "",
    height: int = 300,
    keys: Sequence[str] = (),
) -> str:
    """Bars per label, one colour per series (side by side when ``log`` or not
    ``stacked``). ``fmt`` writes a value with its unit (axis ticks and tooltips);
    ``limit`` draws a dashed line (a memory's size)."""
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys or series)}
    shown = {k: list(v) for k, v in series.items() if any(v)} or {"": [0.0] * len(labels)}
    side = log or not stacked
    n_lab = max(len(labels), 1)
    group = max(28.0, 14.0 * len(shown)) if side else 34.0
    left, right, top, bottom = 78, 12, 12, 70
    width = int(left + right + n_lab * (group + 14))
    plot_h = height - top - bottom
    ticks, y_of = _bar_scale(len(labels), shown, side, log, limit, top, plot_h)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for t in ticks:
        y = y_of(t)
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f"{escape(fmt(t))}</text>"
        )
    out.append(
        f'<text x="12" y="{top + plot_h / 2:.0f}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.0f})">{escape(axis)}</text>'
    )
    names = list(shown)
    for i, label in enumerate(labels):
        x0 = left + 7 + i * (group + 14)
        values = [shown[name][i] for name in names]
        out += _bars(label, names, values, colour, fmt, x0, group, top + plot_h, side, y_of)
        cx = x0 + group / 2
        out.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 12}" class="label" text-anchor="end" '
            f'transform="rotate(-35 {cx:.1f} {top + plot_h + 12})">{escape(label)}</text>'
        )
    if limit and math.isfinite(limit):
        y = y_of(limit)
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="limit"/>'
            f'<text x="{width - right}" y="{y - 3:.1f}" class="tick" text-anchor="end">'
            f"{escape(limit_label)}</text>"
        )
    out.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{colour.get(name, PALETTE[k % len(PALETTE)])}"></i>'
        f"{escape(name)}</span>"
        for k, name in enumerate(names)
        if name
    )
    return f'<div class="chartbox">{"".join(out)}<div class="legend">{legend}</div></div>'


def _bar_scale(
    n_labels: int,
    shown: Mapping[str, Sequence[float]],
    side: bool,
    log: bool,
    limit: float | None,
    top: float,
    plot_h: float,
) -> tuple[list[float], Callable[[float], float]]:
    """The value axis of a bar chart: its ticks and the y of a value (log, or linear from
    0 up to the tallest bar, stack or ``limit``)."""
    totals = [sum(v[i] for v in shown.values()) for i in range(n_labels)]
    values = [x for v in shown.values() for x in v if x > 0]
    high = max((max(values) if side else max(totals, default=0.0)) if values else 1.0, limit or 0)
    if log:
        low = min(values) if values else 1.0
        ticks = _log_ticks(low, high)
        lo, hi = math.log10(ticks[0]), math.log10(ticks[-1])

        def y_of(v: float) -> float:
            if v <= 0:
                return top + plot_h
            return top + plot_h * (1 - (math.log10(v) - lo) / (hi - lo))
    else:
        ticks = _nice_ticks(high)

        def y_of(v: float) -> float:
            return top + plot_h * (1 - v / ticks[-1])

    return ticks, y_of


def _bars(
    label: str,
    names: Sequence[str],
    values: Sequence[float],
    colour: Mapping[str, str],
    fmt: Formatter,
    x0: float,
    group: float,
    base: float,
    side: bool,
    y_of: Callable[[float], float],
) -> list[str]:
    """The bars of one label, one per series: side by side, or stacked up from ``base``."""
    out = []
    for k, (name, v) in enumerate(zip(names, values, strict=True)):
        color = colour.get(name, PALETTE[k % len(PALETTE)])
        tip = f"{label} · {name}: {fmt(v)}" if name else f"{label}: {fmt(v)}"
        if side:
            w = group / len(names)
            x, y = x0 + k * w, y_of(v)
            h = max(base - y, 0)
        else:
            w, x = group, x0
            y = y_of(sum(values[: k + 1]))
            h = max(base - y, 0)
            base = y
        if v > 0:
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{escape(tip)}</title></rect>'
            )
    return out


def _scatter_axis(
    vals: list[float], size: float, flip: bool, log: bool
) -> tuple[list[float], Callable[[float], float]]:
    """A scatter axis: its ticks, and the offset of a value along it (``flip``: from the
    far end, as y grows downwards)."""
    lo_v, hi_v = min(vals), max(vals)
    if log and lo_v > 0:
        ticks = _log_ticks(lo_v, hi_v)
        lo, hi = math.log10(ticks[0]), math.log10(ticks[-1])

        def pos(v: float) -> float:
            f = (math.log10(v) - lo) / (hi - lo)
            return 1 - f if flip else f
    else:
        pad = (hi_v - lo_v) * 0.08 or abs(hi_v) * 0.1 or 1.0
        ticks = _span_ticks(lo_v - pad, hi_v + pad)
        lo, hi = ticks[0], ticks[-1]

        def pos(v: float) -> float:
            f = (v - lo) / (hi - lo)
            return 1 - f if flip else f

    return ticks, lambda v: pos(v) * size


def scatter(
    points: Sequence[tuple[float, float]],
    fmt_x: Formatter,
    fmt_y: Formatter,
    *,
    axis_x: str,
    axis_y: str,
    links: Sequence[str],
    log: bool = False,
    width: int = 560,
    height: int = 360,
) -> str:
    """Numbered points (x, y); point ``k`` links to ``#links[k]``."""
    left, right, top, bottom = 84, 16, 12, 44
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    plot_w, plot_h = width - left - right, height - top - bottom
    tx, px = _scatter_axis(xs, plot_w, False, log)
    ty, py = _scatter_axis(ys, plot_h, True, log)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart pareto" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for t in ty:
        y = top + py(t)
        if top - 1 <= y <= top + plot_h + 1:
            out.append(
                f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                f'<text x="{left - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
                f"{escape(fmt_y(t))}</text>"
            )
    for t in tx:
        x = left + px(t)
        if left - 1 <= x <= left + plot_w + 1:
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>'
                f'<text x="{x:.1f}" y="{top + plot_h + 14}" class="tick" text-anchor="middle">'
                f"{escape(fmt_x(t))}</text>"
            )
    out.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" class="axis" '
        f'text-anchor="middle">{escape(axis_x)}</text>'
        f'<text x="12" y="{top + plot_h / 2:.0f}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.0f})">{escape(axis_y)}</text>'
    )
    order = sorted(range(len(points)), key=lambda i: xs[i])
    path = " ".join(
        f"{'M' if j == 0 else 'L'}{left + px(xs[i]):.1f},{top + py(ys[i]):.1f}"
        for j, i in enumerate(order)
    )
    out.append(f'<path d="{path}" class="front"/>')
    for i, (x, y) in enumerate(points):
        cx, cy = left + px(x), top + py(y)
        tip = f"#{i + 1}: {fmt_y(y)}, {fmt_x(x)}"
        out.append(
            f'<a href="#{escape(links[i])}" class="point" data-point="{i + 1}">'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6"><title>{escape(tip)}</title></circle>'
            f'<text x="{cx + 8:.1f}" y="{cy - 6:.1f}" class="tick">{i + 1}</text></a>'
        )
    out.append("</svg>")
    return "".join(out)
