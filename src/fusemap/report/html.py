"""``fusemap report``: one self-contained HTML page of a result.

The page holds the LoopTree as a collapsible tree (tile shapes, iteration counts, buffer
occupancy per node), tables by component, Einsum and tensor, energy and latency charts
(with a log-scale switch), the buffer usage over the schedule (the model's reservation
lifetimes, ``Result.occupancy``) and, for a Pareto front, a clickable energy-latency plot
linked to each mapping. CSS and script are inline (``assets/``, written for fusemap): the
page loads nothing from the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from ..model.result import Result
from ..spec.mapping import Mapping
from ..units import area, axis_scale, capacity, percent
from . import html_parts as P
from .io import write_atomic
from .looptree import (
    Annotations,
    annotate,
    display_tree,
    fused_tensors,
    merge_storage,
    top_memory,
)
from .provenance import provenance
from .svgchart import bar_chart, scatter
from .tables import Quantities


def _asset(name: str) -> str:
    return resources.files("fusemap.report").joinpath("assets", name).read_text("utf-8")


def _axis(values: Sequence[float], unit: str, unitless: bool, what: str) -> tuple[Any, str]:
    """A tick formatter and an axis title in a unit that reads well for ``values``."""
    scale, shown = axis_scale(max(values, default=0.0), unit, unitless)

    def fmt(v: float) -> str:
        return f"{v / scale:.4g}"

    return fmt, f"{what} ({shown})" if shown else what


def _two_scales(
    labels, series, unit: str, unitless: bool, what: str, stacked: bool = True, keys=()
) -> str:
    """The same bars on a linear and a log axis (the page's switch shows one)."""
    values = [sum(v[i] for v in series.values()) for i in range(len(labels))]
    if not stacked:
        values = [x for v in series.values() for x in v]
    fmt, axis = _axis(values, unit, unitless, what)
    lin = bar_chart(labels, series, fmt, axis=axis, stacked=stacked, keys=keys)
    log = bar_chart(labels, series, fmt, axis=axis + ", log", log=True, keys=keys)
    return f'<div class="v-lin">{lin}</div><div class="v-log">{log}</div>'


def charts(result: Result) -> str:
    """Energy and latency per Einsum by component, energy per tensor and per level."""
    einsums = list(result.einsums)
    ue, ul = "energy" in result.unitless, "latency" in result.unitless

    def per(what: str) -> dict[str, list[float]]:
        out = {}
        for c in result.components:
            out[c] = [
                getattr(result.einsums[e].components[c], what)
                if c in result.einsums[e].components
                else 0.0
                for e in einsums
            ]
        return out

    tensors: dict[str, dict[str, float]] = {}
    actions: dict[str, dict[str, float]] = {}
    for _e, comp, _k, tensor, action, _count, energy in result.rows():
        if tensor:
            row = tensors.setdefault(comp, {})
            row[tensor] = row.get(tensor, 0.0) + energy
        row = actions.setdefault(action, {})
        row[comp] = row.get(comp, 0.0) + energy
    names = sorted({t for r in tensors.values() for t in r})
    comps = list(result.components)
    return (
        "<h3>Energy per Einsum, by component</h3>"
        + _two_scales(einsums, per("energy"), "J", ue, "energy", keys=comps)
        + "<h3>Latency per Einsum, by component (an Einsum takes its slowest component)</h3>"
        + _two_scales(einsums, per("latency"), "s", ul, "latency", stacked=False, keys=comps)
        + "<h3>Access energy per tensor, by memory</h3>"
        + _two_scales(names, {m: [r.get(t, 0.0) for t in names] for m, r in tensors.items()}, "J", ue, "energy", keys=comps)
        + "<h3>Energy per component (level), by action</h3>"
        + _two_scales(comps, {a: [r.get(c, 0.0) for c in comps] for a, r in actions.items()}, "J", ue, "energy")
    )  # fmt: skip


def occupancy(result: Result) -> str:
    """Per memory: the bits live during each Einsum, by tensor, against the memory's size."""
    order = list(result.occupancy)
    out = []
    for name, comp in result.components.items():
        if comp.kind != "memory":
            continue
        per = {e: result.occupancy[e].get(name, {}) for e in order}
        tensors = list(dict.fromkeys(t for e in order for t in per[e]))
        if not tensors:
            continue
        series = {t: [per[e].get(t, 0.0) for e in order] for t in tensors}
        size = comp.size if comp.size is not None else float("inf")
        peak = max((sum(per[e].values()) for e in order), default=0.0)
        head = f"{escape(name)}: peak {capacity(peak)}"
        if size != float("inf"):
            head += f" of {capacity(size)} ({percent(peak / size if size else 0)})"

        def fmt(v: float) -> str:
            return capacity(v)

        limit = size if size != float("inf") else None
        chart = bar_chart(
            order, series, fmt, axis="live bytes", limit=limit, limit_label=f"size {capacity(size)}"
        )
        out.append(f"<h3>{head}</h3>{chart}")
    return "".join(out) or '<p class="note">No memory holds anything.</p>'


def _summary(result: Result, extra: dict[str, str]) -> str:
    q = Quantities(result)
    cards = {
        "energy": q.energy(result.energy),
        "latency": q.latency(result.latency),
        "area": area(result.area),
        "Einsums": str(len(result.einsums)),
        **extra,
    }
    html = "".join(
        f"<div class=card><b>{escape(v)}</b><span>{escape(k)}</span></div>"
        for k, v in cards.items()
    )
    note = q.note()
    return f'<div class="cards">{html}</div>' + (
        f'<p class="sub">{escape(note)}</p>' if note else ""
    )


def _inputs(spec: Any, command: str) -> str:
    info = provenance(spec, command)
    items = [f"fusemap {escape(info['fusemap_version'])}", f"<code>{escape(command)}</code>"]
    for f in info["inputs"]["files"]:
        digest = (f["sha256"] or "")[:12]
        items.append(f"{escape(f['path'])} <span class=note>sha256 {escape(digest)}…</span>")
    for k, v in info["inputs"]["variables"].items():
        items.append(f"-D {escape(k)}={escape(str(v))}")
    return "<br>".join(items)


def _tree(spec: Any, mapping: Mapping, result: Result, fused: set[str], notes=None) -> str:
    notes = (
        notes
        if notes is not None
        else (annotate(spec, mapping) if spec is not None else Annotations())
    )
    return (
        '<button data-tree="open">expand all</button><button data-tree="close">collapse all</button>'
        + P.tree_html(display_tree(mapping, notes), result, fused)
    )


def _front(spec: Any, front: Sequence, objective_best: int = 0) -> str:
    """The clickable energy-latency plot and one section per mapping of the front."""
    results = [m.result for m in front]
    ue, ul = "energy" in results[0].unitless, "latency" in results[0].unitless
    fe, ae = _axis([r.energy for r in results], "J", ue, "energy")
    fl, al = _axis([r.latency for r in results], "s", ul, "latency")
    links = [f"point-{i + 1}" for i in range(len(front))]
    pts = [(r.latency, r.energy) for r in results]
    plots = (
        f'<div class="v-lin">{scatter(pts, fl, fe, axis_x=al, axis_y=ae, links=links)}</div>'
        f'<div class="v-log">{scatter(pts, fl, fe, axis_x=al, axis_y=ae, links=links, log=True)}</div>'
    )
    rows = []
    for i, m in enumerate(front):
        q = Quantities(m.result)
        fused = ", ".join(f"{f.tensor}@{f.memory}" for f in m.fused) or "none"
        rows.append(
            [
                (str(i + 1), i + 1),
                (q.energy(m.result.energy), m.result.energy),
                (q.latency(m.result.latency), m.result.latency),
                (fused, fused),
            ]
        )
    listing = P.table(["#", "energy", "latency", "fused tensors"], rows, "front")
    details = []
    for i, m in enumerate(front):
        q = Quantities(m.result)
        fused_names = {f.tensor for f in m.fused}
        yaml = merge_storage(m.mapping).to_yaml()
        details.append(
            f'<div class="point-detail" id="point-{i + 1}"><h3>Mapping {i + 1}: energy '
            f"{escape(q.energy(m.result.energy))}, latency {escape(q.latency(m.result.latency))}</h3>"
            + (P.fused_rows(m.fused) if m.fused else '<p class="note">Nothing fused.</p>')
            + P.einsum_rows(m.result)
            + f"<details><summary>LoopTree</summary>{_tree(spec, m.mapping, m.result, fused_names)}</details>"
            + f'<details><summary>mapping YAML</summary><pre class="yaml">{escape(yaml)}</pre></details></div>'
        )
    return plots + listing + "".join(details)


def report_page(
    result: Result,
    mapping: Mapping | None,
    spec: Any = None,
    *,
    title: str = "fusemap report",
    command: str = "fusemap report",
    fused: Sequence | None = None,
    front: Sequence = (),
    statistics: dict[str, Any] | None = None,
    notes: Annotations | None = None,
) -> str:
    """The whole page as text."""
    from ..spec.resolve import resolve_workload

    workload = None
    if spec is not None and spec.workload is not None:
        workload = resolve_workload(spec)
    if fused is None:  # an evaluated mapping: its fused tensors, read off the tree
        fused = []
        if mapping is not None and workload is not None:
            fused = fused_tensors(mapping, workload, top_memory(spec))
    fused_at = {f.tensor: f.memory for f in fused}
    sections = []
    if mapping is not None:
        sections.append(
            ("looptree", "LoopTree", _tree(spec, mapping, result, set(fused_at), notes))
        )
    if fused:
        sections.append(("fused", "Fused tensors", P.fused_rows(fused)))
    sections += [
        ("einsums", "Per Einsum", P.einsum_rows(result)),
        ("components", "Per component", P.component_rows(result)),
        ("tensors", "Per tensor", P.tensor_rows(result, fused_at, workload)),
        ("charts", "Energy and latency", charts(result)),
        ("occupancy", "Buffer usage over the schedule", occupancy(result)),
        (
            "actions",
            "Every action",
            "<details><summary>one row per Einsum, component, tensor and action "
            "(<code>Result.to_frame()</code>)</summary>" + P.action_rows(result) + "</details>",
        ),
    ]
    if front:
        sections.insert(0, ("pareto", "Energy-latency Pareto front", _front(spec, front)))
    if statistics:
        stats = "".join(f"<li>{escape(k)}: {escape(str(v))}</li>" for k, v in statistics.items())
        sections.append(("statistics", "Mapper statistics", f"<ul>{stats}</ul>"))
    if result.warnings:
        warn = "".join(f"<li class=warn>{escape(w)}</li>" for w in result.warnings)
        sections.insert(0, ("warnings", "Warnings", f"<ul>{warn}</ul>"))
    nav = "".join(f'<a href="#{k}">{escape(t)}</a>' for k, t, _ in sections)
    body = "".join(
        f'<section id="{k}"><h2>{escape(t)}</h2>{html}</section>' for k, t, html in sections
    )
    extra = {"fused tensors": str(len(fused))} if fused else {}
    if front:
        extra["Pareto points"] = str(len(front))
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        # nothing may load from anywhere: the page is whole as written
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        "<script>window.fusemapErrors=[];window.addEventListener('error',function(e){"
        "window.fusemapErrors.push(String(e.message));"
        "document.documentElement.setAttribute('data-errors',window.fusemapErrors.join(' | '));});"
        "</script>"
        f"<style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>{escape(title)}</h1>{_summary(result, extra)}</header>"
        f'<nav>{nav}<label><input type="checkbox" id="log"> log scale</label></nav>'
        f"<main>{body}</main>"
        f"<footer>{_inputs(spec, command)}</footer>"
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def write_report(out: str | Path, *args: Any, **kwargs: Any) -> Path:
    """Write :func:`report_page` to ``out`` (atomically)."""
    return write_atomic(out, report_page(*args, **kwargs))
