"""Fragments of the HTML report: the collapsible LoopTree and the tables.

Every text from a spec (names, paths) goes through ``html.escape``; numbers carry their
unit in the cell and their raw value in ``data-v`` (for sorting)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ..model.result import Result
from ..units import area, capacity, number, percent
from .looptree import DisplayNode
from .tables import Quantities, usage_text

Cell = tuple[str, float | str | None]
"""A table cell: its text and the value it sorts by (a string or None: a text column)."""


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], cls: str = "") -> str:
    """A sortable table; each cell is (text, sort value). Text columns are left-aligned."""
    first = rows[0] if rows else []
    text_cols = {i for i, (_, v) in enumerate(first) if isinstance(v, str) or v is None}
    head = "".join(
        f'<th class="text">{escape(h)}</th>' if i in text_cols else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = []
        for text, value in row:
            v = "" if value is None else value
            if isinstance(v, float) and not math.isfinite(v):
                v = ""
            kind = ' class="text"' if isinstance(value, str) or value is None else ""
            cells.append(f'<td{kind} data-v="{escape(str(v))}">{escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table class="sortable {cls}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def component_rows(result: Result) -> str:
    q = Quantities(result)
    total = result.energy or 1.0
    rows: list[list[Cell]] = []
    for c in result.components.values():
        rows.append(
            [
                (c.name, c.name),
                (c.kind, c.kind),
                (q.energy(c.energy), c.energy),
                (percent(c.energy / total), c.energy / total),
                (q.latency(c.latency), c.latency),
                (usage_text(c.usage_bits, c.size, c.usage), c.usage_bits),
                (capacity(c.size) if c.size is not None else "-", c.size),
                (area(c.area), c.area),
                (q.power(c.leak_power), c.leak_power),
            ]
        )
    heads = [
        "component",
        "kind",
        "energy",
        "share",
        "latency",
        "buffer usage",
        "size",
        "area",
        "leak",
    ]
    return table(heads, rows, "components")


def einsum_rows(result: Result) -> str:
    q = Quantities(result)
    total = result.energy or 1.0
    rows: list[list[Cell]] = []
    for e in result.einsums.values():
        usage = ", ".join(f"{k.split('.')[-1]} {number(v)}" for k, v in e.fanout_usage.items())
        rows.append(
            [
                (e.name, e.name),
                (q.energy(e.energy), e.energy),
                (percent(e.energy / total), e.energy / total),
                (q.latency(e.latency), e.latency),
                (e.bound_by, e.bound_by),
                (e.compute_unit, e.compute_unit),
                (number(e.operations), e.operations),
                (usage or "-", usage),
            ]
        )
    heads = [
        "Einsum", "energy", "share", "latency", "bound by", "compute unit", "operations",
        "spatial instances used (per dimension)",
    ]  # fmt: skip
    return table(heads, rows, "einsums")


def tensor_rows(result: Result, fused: dict[str, str], workload=None) -> str:
    """Per tensor: shape, size, where it is fused, and access energy per memory."""
    q = Quantities(result)
    per: dict[str, dict[str, float]] = {}
    memories: list[str] = []
    for e in result.einsums.values():
        for c in e.components.values():
            for t, acts in c.tensors.items():
                if c.name not in memories:
                    memories.append(c.name)
                row = per.setdefault(t, {})
                row[c.name] = row.get(c.name, 0.0) + sum(r.energy for r in acts.values())
    total = result.energy or 1.0
    rows: list[list[Cell]] = []
    for t, by in per.items():
        info = workload.tensors.get(t) if workload is not None else None
        shape = "×".join(map(str, info.shape)) if info else ""
        size = info.size * info.bits_per_value if info else None
        s = sum(by.values())
        rows.append(
            [
                (t, t),
                (shape, shape),
                (capacity(size) if size is not None else "-", size),
                (fused.get(t, ""), fused.get(t, "")),
                *((q.energy(by.get(m, 0.0)), by.get(m, 0.0)) for m in memories),
                (q.energy(s), s),
                (percent(s / total), s / total),
            ]
        )
    heads = ["tensor", "shape", "size", "fused in", *memories, "total", "share"]
    return table(heads, rows, "tensors")


def action_rows(result: Result) -> str:
    """The long-format rows of ``Result.to_frame()`` as a table."""
    q = Quantities(result)
    rows: list[list[Cell]] = []
    for einsum, comp, _kind, tensor, action, count, energy in result.rows():
        rows.append(
            [
                (einsum, einsum),
                (comp, comp),
                (tensor or "", tensor or ""),
                (action, action),
                (number(count) if count is not None else "", count),
                (q.energy(energy), energy),
            ]
        )
    return table(["Einsum", "component", "tensor", "action", "count", "energy"], rows, "actions")


def fused_rows(fused: Sequence) -> str:
    rows: list[list[Cell]] = []
    for f in fused:
        loops = f.loops_text()
        rows.append([(f.tensor, f.tensor), (f.memory, f.memory), (loops, loops)])
    return table(["tensor", "kept in", "shared loops (rank variable: tile)"], rows, "fused")


def tree_html(root: DisplayNode, result: Result | None, fused: set[str]) -> str:
    """The LoopTree as nested ``<details>``: a node's subtree folds under it."""
    q = Quantities(result) if result is not None else Quantities()

    def item(node: DisplayNode) -> str:
        body = _node_body(node, result, q, fused)
        kids = node.children
        if node.is_split:
            inner = "".join(_branch(b) for b in kids)
        else:
            inner = "".join(item(c) for c in kids)
        if not inner:
            return f'<li class="leaf">{body}</li>'
        return f"<li><details open><summary>{body}</summary><ul>{inner}</ul></details></li>"

    def _branch(branch: DisplayNode) -> str:
        inner = "".join(item(c) for c in branch.children)
        title = escape(branch.title or "branch")
        return (
            f'<li><details open><summary><span class="badge k-split">branch</span>{title}'
            f"</summary><ul>{inner}</ul></details></li>"
        )

    inner = "".join(item(c) for c in root.children)
    return f'<ul class="tree">{inner}</ul>'


def _node_body(node: DisplayNode, result: Result | None, q: Quantities, fused: set[str]) -> str:
    badge = f'<span class="badge k-{node.kind}">{escape(node.kind)}</span>'
    text = escape(node.title)
    if node.kind == "storage" and node.tiles:
        marks = []
        for t in node.tiles:
            mark = ' <span class="fusedmark" title="fused">⇄</span>' if t.tensor in fused else ""
            marks.append(escape(t.text()) + mark)
        share = node.bits / node.size if math.isfinite(node.size) and node.size else None
        bar = (
            f'<span class="occ" title="{escape(percent(share))} of {escape(capacity(node.size))}">'
            f'<i style="width:{min(share, 1) * 100:.1f}%"></i></span>'
            if share is not None
            else ""
        )
        held = escape(node.details[-1]) if node.details else ""
        return f'{badge}{text} {bar}<span class="note">{held}</span><span class="tiles">{"<br>".join(marks)}</span>'
    if node.kind == "compute" and result is not None and node.einsums:
        e = result.einsums.get(node.einsums[0])
        if e is not None:
            extra = f"energy {q.energy(e.energy)}, latency {q.latency(e.latency)}, bound by {e.bound_by}"
            return f'{badge}{text} <span class="note">{escape(extra)}</span>'
    return badge + text
