"""Plots of a sweep: each objective (and area) against each swept variable, one line per
combination of the other variables; and the energy-latency Pareto front over points."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..report.plots import pyplot, save_figure
from ..units import area_scale, axis_scale
from .record import OK, PointRecord
from .run import SweepOutcome
from .summary import point_label, show_value

QUANTITIES = (("energy", "J"), ("latency", "s"), ("edp", "J·s"), ("area", "m²"))
MAX_LEGEND = 8
MAX_LABELS = 8
MAX_TICKS = 12
MAX_NUMBERED = 60


def write_sweep_plots(outcome: SweepOutcome, folder: str | Path) -> list[Path]:
    """``objectives.png`` and ``pareto.png`` in ``folder`` (nothing without a finished
    point)."""
    ok = [r for r in outcome.records if r.status == OK]
    if not ok:
        return []
    folder = Path(folder)
    return [
        objectives_plot(outcome, ok, folder / "objectives.png"),
        pareto_plot(ok, folder / "pareto.png"),
    ]


def _scale(name: str, unit: str, values: Sequence[float], unitless: bool) -> tuple[float, str]:
    largest = max((abs(v) for v in values), default=0.0)
    if name == "area":
        return area_scale(largest) if largest else (1.0, "m²")
    return axis_scale(largest, unit, unitless)


def _unitless(records: Sequence[PointRecord], name: str) -> bool:
    r = records[0]
    return {"energy": r.energy_unit == "1", "latency": r.latency_unit == "1"}.get(
        name, r.energy_unit == "1" or r.latency_unit == "1"
    )


def _positions(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """Numbers stay numbers; other values are placed in order of appearance, labelled."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], None
    names = list(dict.fromkeys(show_value(v) for v in values))
    return [float(names.index(show_value(v))) for v in values], names


def objectives_plot(outcome: SweepOutcome, ok: list[PointRecord], out: Path) -> Path:
    """A grid: a row per quantity, a column per swept variable."""
    plt = pyplot()
    swept = outcome.plan.swept
    fig, axes = plt.subplots(
        len(QUANTITIES), len(swept), figsize=(4.2 * len(swept), 2.6 * len(QUANTITIES)),
        squeeze=False,
    )  # fmt: skip
    for col, var in enumerate(swept):
        others = [v.name for v in swept if v.name != var.name]
        groups: dict[tuple, list[PointRecord]] = {}
        for r in ok:
            groups.setdefault(tuple(show_value(r.values[n]) for n in others), []).append(r)
        for row, (name, unit) in enumerate(QUANTITIES):
            ax = axes[row][col]
            values = [r.objective_value(name) if name != "area" else r.area for r in ok]
            scale, shown = _scale(name, unit, [v for v in values if v is not None],
                                  _unitless(ok, name))  # fmt: skip
            ticks = None
            for label, members in groups.items():
                xs, ticks = _positions([r.values[var.name] for r in members])
                ys = [
                    (r.objective_value(name) if name != "area" else r.area) or 0.0 for r in members
                ]
                pairs = sorted(zip(xs, ys, strict=True))
                text = ", ".join(f"{n}={v}" for n, v in zip(others, label, strict=True))
                ax.plot([x for x, _ in pairs], [y / scale for _, y in pairs], marker="o",
                        ms=3, lw=1, label=text or None)  # fmt: skip
            _x_axis(ax, var.values, ticks, var.log)
            positive = [v for v in values if v]
            if positive and min(positive) > 0 and max(positive) / min(positive) > 100:
                ax.set_yscale("log")
            ax.set_ylabel(f"{'EDP' if name == 'edp' else name} ({shown})" if shown else name,
                          fontsize=8)  # fmt: skip
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if row == len(QUANTITIES) - 1:
                ax.set_xlabel(var.name, fontsize=9)
        if others and 1 < len(groups) <= MAX_LEGEND:
            axes[0][col].legend(fontsize=6)
    title = f"{Path(outcome.plan.path).name}: {len(ok)} points"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out)


def _x_axis(ax: Any, values: tuple[Any, ...], names: list[str] | None, log: bool) -> None:
    """Ticks at the swept values (up to a dozen), written as the table writes them."""
    if names:
        ax.set_xticks(range(len(names)), names, rotation=30, fontsize=7)
        return
    if log:
        ax.set_xscale("log")
        ax.minorticks_off()
    shown = sorted(set(values))
    if len(shown) <= MAX_TICKS:
        ax.set_xticks([float(v) for v in shown], [show_value(v) for v in shown])


def pareto_front(records: Sequence[PointRecord]) -> list[PointRecord]:
    """The points no other point beats in both energy and latency, by latency."""
    ordered = sorted(records, key=lambda r: (r.latency, r.energy, r.index))
    front: list[PointRecord] = []
    lowest = math.inf
    for r in ordered:
        assert r.energy is not None
        if r.energy < lowest:
            front.append(r)
            lowest = r.energy
    return front


def pareto_plot(ok: list[PointRecord], out: Path) -> Path:
    """Every finished point, the front joined by a step line, the best points labelled."""
    plt = pyplot()
    es = [r.energy or 0.0 for r in ok]
    ls = [r.latency or 0.0 for r in ok]
    se, ue = axis_scale(max(es), "J", _unitless(ok, "energy"))
    sl, ul = axis_scale(max(ls), "s", _unitless(ok, "latency"))
    front = pareto_front(ok)
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.scatter([x / sl for x in ls], [y / se for y in es], color="#9ca3af", s=14,
               label="points")  # fmt: skip
    fx = [(r.latency or 0.0) / sl for r in front]
    fy = [(r.energy or 0.0) / se for r in front]
    ax.step(fx, fy, where="post", color="#1d4ed8", lw=1)
    ax.scatter(fx, fy, color="#1d4ed8", zorder=3, s=22, label="Pareto front")
    labelled = front if len(front) <= MAX_LABELS else _bests(front)
    for text, (x, y) in _labels(ok, labelled):
        grey = {} if text[0] != "#" else {"fontsize": 6, "color": "#6b7280"}
        ax.annotate(text.lstrip("#"), (x / sl, y / se), textcoords="offset points",
                    xytext=(5, 4) if not grey else (4, -8), **({"fontsize": 7} | grey))  # fmt: skip
    ax.set_xlabel(f"latency ({ul})" if ul else "latency")
    ax.set_ylabel(f"energy ({ue})" if ue else "energy")
    ax.set_title(f"Energy-latency front: {len(front)} of {len(ok)} points", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out)


def _labels(
    ok: list[PointRecord], labelled: list[PointRecord]
) -> list[tuple[str, tuple[float, float]]]:
    """A label per place: the labelled points' variables (``1: S=32 (also 4, 7)`` when
    others lie on it), the other points' numbers (``#5, 8``; up to MAX_NUMBERED points)."""
    places: dict[tuple[float, float], list[PointRecord]] = {}
    for r in ok:
        places.setdefault((r.latency or 0.0, r.energy or 0.0), []).append(r)
    named = {r.index for r in labelled}
    out = []
    for where, members in places.items():
        main = [r for r in members if r.index in named]
        rest = ", ".join(str(r.index + 1) for r in members if r.index not in named)
        if main:
            also = f" (also {rest})" if rest and len(ok) <= MAX_NUMBERED else ""
            out.append((f"{main[0].index + 1}: {point_label(main[0])}{also}", where))
        elif len(ok) <= MAX_NUMBERED:
            out.append((f"#{rest}", where))
    return out


def _bests(front: list[PointRecord]) -> list[PointRecord]:
    """The lowest energy, the lowest latency and the lowest EDP of a front."""
    picks = [
        min(front, key=lambda r: (r.objective_value(n), r.index))
        for n in ("energy", "latency", "edp")
    ]
    return list({r.index: r for r in picks}.values())
