"""Readable summaries for the terminal (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..analysis.passes import PassAnalysis
from ..model.result import Result
from ..spec import arch as A
from ..spec.resolve import WorkloadInfo
from ..spec.spec import Spec
from .render import text_tree


def fmt(x: float | None, unit: str = "") -> str:
    """Engineering notation: 1.23e-06 J -> 1.23 µJ."""
    if x is None:
        return "-"
    if x == 0:
        return f"0 {unit}".strip()
    if x == float("inf"):
        return "inf"
    prefixes = [
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
        (1e-9, "n"),
        (1e-12, "p"),
        (1e-15, "f"),
    ]
    for scale, p in prefixes:
        if abs(x) >= scale:
            return f"{x / scale:.4g} {p}{unit}".strip()
    return f"{x:.3g} {unit}".strip()


MAX_RICH_ROWS = 200
"""Larger tables print as plain aligned text (rich takes seconds for thousands of rows)."""


def table(
    title: str, columns: Sequence[str], rows: list[Sequence[str]], right: Sequence[str] = ()
) -> Table | Text:
    """A table with a title; plain aligned text when it has many rows."""
    if len(rows) <= MAX_RICH_ROWS:
        t = Table(title=title, title_justify="left")
        for col in columns:
            t.add_column(col, justify="right" if col in right else "left")
        for row in rows:
            t.add_row(*(Text(cell) for cell in row))
        return t
    widths = [max(len(c), *(len(r[k]) for r in rows)) for k, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if col in right else cell.ljust(w)
            for cell, w, col in zip(cells, widths, columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    body = [line(columns), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]
    return Text(title + "\n" + "\n".join(body))


def workload_table(wl: WorkloadInfo) -> Table | Text:
    """Einsums with their tensors, rank variables and bounds."""
    rows = [
        (
            e.name + (" (copy)" if e.is_copy else ""),
            ", ".join(e.inputs),
            ", ".join(e.outputs),
            ", ".join(f"{v}={b}" for v, b in e.bounds.items()),
            f"{e.operations:,}",
        )
        for e in wl.einsums
    ]
    columns = ("Einsum", "inputs", "outputs", "rank variables (bounds)", "operations")
    return table("Workload", columns, rows)


def tensor_table(wl: WorkloadInfo) -> Table | Text:
    """Tensors with shape, size and role."""
    rows = []
    for info in wl.tensors.values():
        role = "intermediate" if info.is_intermediate else ("output" if info.writers else "input")
        rows.append(
            (
                info.name,
                ", ".join(info.ranks),
                "×".join(map(str, info.shape)) or "scalar",
                f"{info.size:,}",
                f"{info.bits_per_value:g}",
                role,
            )
        )
    columns = ("tensor", "ranks", "shape", "values", "bits/value", "role")
    return table("Tensors", columns, rows)


def arch_tree(arch: A.Arch) -> Tree:
    """The architecture as a tree, top (root) to compute units."""
    root = Tree("Architecture")

    def add(parent: Tree, nodes: list) -> None:
        cur = parent
        for n in nodes:
            if isinstance(n, A.Fork):
                add(cur.add("fork"), n.nodes)
                continue
            text = f"{n.type} {n.name}"
            if isinstance(n, A.Memory):
                text += f"  size={n.size}"
            if n.spatial:
                text += "  spatial: " + ", ".join(f"{d.name}×{d.fanout}" for d in n.spatial)
            cur = cur.add(text)

    add(root, arch.nodes)
    return root


def check_summary(spec: Spec, wl: WorkloadInfo | None) -> Group:
    """What ``fusemap check`` prints."""
    parts: list = []
    if wl is not None:
        parts += [workload_table(wl), tensor_table(wl)]
    if spec.arch is not None:
        parts.append(arch_tree(spec.arch))
    if spec.mapping is not None:
        parts += [Text("Mapping (LoopTree)", style="bold"), Text(text_tree(spec.mapping))]
    return Group(*parts)


def result_tables(result: Result) -> Group:
    """What ``fusemap evaluate`` prints: per component and per Einsum."""
    comp = Table(title="Per component", title_justify="left")
    for col in ("component", "energy", "share", "latency", "buffer usage", "area", "leak"):
        comp.add_column(col, justify="right" if col != "component" else "left")
    total = result.energy or 1.0
    for c in result.components.values():
        usage = (
            "-"
            if c.usage is None
            else (
                f"{fmt(c.usage_bits)}b"
                if c.size == float("inf")
                else f"{c.usage:.1%} of {fmt(c.size)}b"
            )
        )
        comp.add_row(
            c.name,
            fmt(c.energy, "J"),
            f"{c.energy / total:.1%}",
            fmt(c.latency, "s"),
            usage,
            fmt(c.area, "m²"),
            fmt(c.leak_power, "W"),
        )
    rows = [
        (e.name, fmt(e.energy, "J"), fmt(e.latency, "s"), e.bound_by)
        for e in result.einsums.values()
    ]
    ein = table("Per Einsum", ("Einsum", "energy", "latency", "bound by"), rows)
    head = f"[bold]Total energy[/bold] {fmt(result.energy, 'J')}   [bold]latency[/bold] {fmt(result.latency, 's')}"
    return Group(comp, ein, head)


def pass_tables(analysis: PassAnalysis) -> Group:
    """Stages of the Einsums and live tensors of a pass analysis."""
    a = analysis
    split = f" = {' x '.join(a.components)}" if a.components != (a.rank,) else ""
    iterative = f", iterative: {', '.join(a.iterative)}" if a.iterative else ""
    head = f"{a.passes} pass{'es' if a.passes != 1 else ''} over {a.rank}{split}{iterative}"
    stages = Table(title=head, title_justify="left")
    for col in ("Einsum", "stage", "sweeps R", "full reduction"):
        stages.add_column(col)
    for name, stage in a.stages.items():
        stages.add_row(
            name,
            str(stage),
            "yes" if name in a.sweeping else "",
            "yes" if name in a.barriers else "",
        )
    live = Table(title="Live across stages (one fiber)", title_justify="left")
    for col in ("tensor", "stages", "elements", "bytes", "fibers"):
        live.add_column(col)
    for t, v in a.live.items():
        live.add_row(
            t,
            ", ".join(map(str, v.stages)),
            f"{v.fiber_elements:,}",
            fmt(v.fiber_bytes, "B"),
            f"{v.fibers:,}",
        )
    if not a.live:
        live.add_row("none", "", "", "", "")
    return Group(stages, live)


def print_group(group: Group) -> None:
    """Print to stdout."""
    Console(soft_wrap=False).print(group)


def print_warnings(result: Result) -> None:
    """The model's warnings, one line each, on standard error."""
    import sys

    for line in result.warnings:
        print(f"warning: {line}", file=sys.stderr)
