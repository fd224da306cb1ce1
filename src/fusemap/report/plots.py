"""Plots of a result (matplotlib, no display needed): energy and latency per Einsum,
area per component, energy per tensor and per memory level, and the Pareto front.

Every axis is in a readable unit (µJ, ms, mm²: no raw joules with an offset), every title
fits its figure, and ``log=True`` puts the values on a log axis so small Einsums show.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path

from ..model.result import Result
from ..units import area_scale, axis_scale, quantity
from .io import check_plot, write_atomic

PLOTS = ("energy", "latency", "area", "tensors", "levels")
"""Plots of one result (``write_plots`` writes them all); ``pareto`` needs a front."""


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out: str | Path) -> Path:
    """Write ``fig`` to ``out`` atomically (format from the extension) and close it."""
    check_plot(out)
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(out).suffix.lstrip(".").lower() or "png", dpi=120)
    plt.close(fig)
    return write_atomic(out, buf.getvalue())


def _bars(
    title: str,
    labels: list[str],
    series: dict[str, list[float]],
    unit: str,
    unitless: bool,
    log: bool,
    out: str | Path,
    stacked: bool = True,
    what: str = "energy",
) -> Path:
    """Bars per label, one colour per series: stacked (linear) or side by side (log)."""
    plt = pyplot()
    series = {k: v for k, v in series.items() if any(v)} or series  # no empty legend entries
    totals = [sum(v[i] for v in series.values()) for i in range(len(labels))]
    largest = max(totals if stacked else [x for v in series.values() for x in v], default=0.0)
    scale, shown = axis_scale(largest, unit, unitless)
    width_in = max(6.0, 0.9 * len(labels) + 3)
    fig, ax = plt.subplots(figsize=(width_in, 4.8))
    x = list(range(len(labels)))
    if stacked and not log:
        bottom = [0.0] * len(labels)
        for name, values in series.items():
            scaled = [v / scale for v in values]
            ax.bar(x, scaled, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, scaled, strict=True)]
    else:
        n = max(len(series), 1)
        w = 0.8 / n
        for k, (name, values) in enumerate(series.items()):
            xs = [i - 0.4 + w * (k + 0.5) for i in x]
            ax.bar(xs, [v / scale for v in values], width=w, label=name)
    if log:
        ax.set_yscale("log", nonpositive="clip")
    ax.set_xticks(
        x,
        labels,
        rotation=30 if len(labels) > 4 else 0,
        ha="right" if len(labels) > 4 else "center",
    )
    axis = f"{what} ({shown})" if shown else what
    ax.set_ylabel(axis + (", log scale" if log else ""))
    if not log:
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_title(title, fontsize=10, wrap=True)
    ax.legend(fontsize=8, loc="best")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)


def energy_breakdown(result: Result, out: str | Path, log: bool = False) -> Path:
    """Energy per Einsum, one colour per component (stacked; side by side with ``log``)."""
    einsums = list(result.einsums)
    series = {c: [_use(result, e, c, "energy") for e in einsums] for c in result.components}
    total = quantity(result.energy, "J", "energy" in result.unitless)
    title = f"Energy per Einsum and component (total {total})"
    return _bars(title, einsums, series, "J", "energy" in result.unitless, log, out)


def latency_breakdown(result: Result, out: str | Path, log: bool = False) -> Path:
    """Latency of each component per Einsum, side by side (an Einsum lasts as long as its
    slowest component)."""
    einsums = list(result.einsums)
    series = {c: [_use(result, e, c, "latency") for e in einsums] for c in result.components}
    total = quantity(result.latency, "s", "latency" in result.unitless)
    title = f"Latency per Einsum and component (total {total}; an Einsum takes its longest)"
    return _bars(
        title, einsums, series, "s", "latency" in result.unitless, log, out,
        stacked=False, what="latency",
    )  # fmt: skip


def area_breakdown(result: Result, out: str | Path, log: bool = False) -> Path:
    """Area per component (horizontal bars)."""
    plt = pyplot()
    names = list(result.components)
    values = [result.components[c].area for c in names]
    scale, unit = area_scale(max(values, default=0.0) or 1e-6)
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.4 * len(names) + 1.5)))
    ax.barh(names, [v / scale for v in values], color="#6b8fd6")
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log", nonpositive="clip")
    ax.set_xlabel(f"area ({unit})" + (", log scale" if log else ""))
    area_total = sum(values) / scale
    ax.set_title(f"Area per component (total {area_total:.4g} {unit})", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)


def tensor_breakdown(result: Result, out: str | Path, log: bool = False) -> Path:
    """Access energy per tensor, one colour per memory."""
    per: dict[str, dict[str, float]] = {}
    for e in result.einsums.values():
        for c in e.components.values():
            for t, acts in c.tensors.items():
                row = per.setdefault(c.name, {})
                row[t] = row.get(t, 0.0) + sum(r.energy for r in acts.values())
    tensors = sorted({t for row in per.values() for t in row})
    series = {m: [row.get(t, 0.0) for t in tensors] for m, row in per.items()}
    title = "Access energy per tensor and memory"
    return _bars(title, tensors, series, "J", "energy" in result.unitless, log, out)


def level_breakdown(result: Result, out: str | Path, log: bool = False) -> Path:
    """Energy per component (memory level), one colour per action (and leak)."""
    comps = list(result.components)
    actions: dict[str, dict[str, float]] = {}
    for e in result.einsums.values():
        for c in e.components.values():
            for a, r in c.actions.items():
                row = actions.setdefault(a, {})
                row[c.name] = row.get(c.name, 0.0) + r.energy
            if c.leak_energy:
                row = actions.setdefault("leak", {})
                row[c.name] = row.get(c.name, 0.0) + c.leak_energy
    series = {a: [row.get(c, 0.0) for c in comps] for a, row in actions.items()}
    title = "Energy per component (level) and action"
    return _bars(title, comps, series, "J", "energy" in result.unitless, log, out)


def pareto_plot(points: Sequence, out: str | Path, log: bool = False) -> Path:
    """The energy-latency front: one numbered point per mapping (``.result``)."""
    plt = pyplot()
    results = [m.result for m in points]
    unit_e = "energy" in results[0].unitless if results else False
    unit_l = "latency" in results[0].unitless if results else False
    es, ls = [r.energy for r in results], [r.latency for r in results]
    se, ue = axis_scale(max(es, default=0.0), "J", unit_e)
    sl, ul = axis_scale(max(ls, default=0.0), "s", unit_l)
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    ax.step([x / sl for x in ls], [y / se for y in es], where="post", color="#9ca3af", lw=1)
    ax.scatter([x / sl for x in ls], [y / se for y in es], color="#1d4ed8", zorder=3)
    for i, (x, y) in enumerate(zip(ls, es, strict=True)):
        ax.annotate(
            str(i + 1), (x / sl, y / se), textcoords="offset points", xytext=(4, 4), fontsize=8
        )
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"latency ({ul})" if ul else "latency")
    ax.set_ylabel(f"energy ({ue})" if ue else "energy")
    ax.set_title(f"Energy-latency Pareto front ({len(points)} mappings)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)


def _use(result: Result, einsum: str, component: str, what: str) -> float:
    use = result.einsums[einsum].components.get(component)
    return getattr(use, what) if use is not None else 0.0


PLOTTERS: dict[str, Callable[..., Path]] = {
    "energy": energy_breakdown,
    "latency": latency_breakdown,
    "area": area_breakdown,
    "tensors": tensor_breakdown,
    "levels": level_breakdown,
}


def write_plots(
    result: Result, folder: str | Path, log: bool = False, front: Sequence | None = None
) -> list[Path]:
    """Every plot of ``result`` as ``folder/<name>.png`` (and the front's, if given)."""
    folder = Path(folder)
    out = [plot(result, folder / f"{name}.png", log) for name, plot in PLOTTERS.items()]
    if front:
        out.append(pareto_plot(front, folder / "pareto.png", log))
    return out
