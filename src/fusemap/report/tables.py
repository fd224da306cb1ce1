"""Readable summaries for the terminal (rich tables), every number with its unit."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..analysis.passes import PassAnalysis
from ..model.result import Result
from ..spec import arch as A
from ..spec.arch_eval import ComponentInfo
from ..spec.resolve import WorkloadInfo
from ..units import area, capacity, number, percent, quantity, si


def fmt(x: float | None, unit: str = "") -> str:
    """Engineering notation: 1.23e-06 J -> 1.23 µJ (kept for callers of the old name)."""
    return si(x, unit)


class Quantities:
    """Formats a result's numbers with its units (plain numbers for unitless specs)."""

    def __init__(self, result: Result | None = None, unitless: frozenset[str] = frozenset()):
        self.unitless = result.unitless if result is not None else unitless

    def energy(self, x: float | None) -> str:
        return quantity(x, "J", "energy" in self.unitless)

    def latency(self, x: float | None) -> str:
        return quantity(x, "s", "latency" in self.unitless)

    def power(self, x: float | None) -> str:
        return quantity(x, "W", "energy" in self.unitless)

    def note(self) -> str:
        """A line saying which quantities are unitless, or nothing."""
        parts = []
        if "energy" in self.unitless:
            parts.append("energies are unitless (the arch's action energies are >= 1e-3: counts)")
        if "latency" in self.unitless:
            parts.append("latencies are in cycles (every throughput is below 1e4 per second)")
        return "; ".join(parts)


def console() -> Console:
    """A console as wide as the terminal; piped or redirected output is never cut.

    Markup is off: names from a spec (a memory called ``b``) print as written."""
    if sys.stdout.isatty():
        return Console(soft_wrap=False, markup=False)
    return Console(width=100_000, soft_wrap=False, color_system=None, markup=False)


def usage_text(used_bits: float | None, size_bits: float | None, fraction: float | None) -> str:
    """``6.2% of 256 KiB`` (``20 KiB`` for an unbounded memory, ``-`` if not a memory)."""
    if fraction is None or used_bits is None:
        return "-"
    if size_bits is None or size_bits == float("inf"):
        return capacity(used_bits)
    return f"{percent(fraction)} of {capacity(size_bits)}"


MAX_RICH_ROWS = 200
"""Larger tables print as plain aligned text (rich takes seconds for thousands of rows)."""


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
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
                capacity(info.size * info.bits_per_value),
                role,
            )
        )
    columns = ("tensor", "ranks", "shape", "values", "bits/value", "size", "role")
    return table("Tensors", columns, rows, right=("values", "bits/value", "size"))


def arch_tree(arch: A.Arch, evaluated: dict[str, ComponentInfo] | None = None) -> Tree:
    """The architecture as a tree, top (root) to compute units, with evaluated sizes,
    fanouts and areas when ``evaluated`` (the components for one Einsum) is given."""
    root = Tree("Architecture")

    def add(parent: Tree, nodes: list) -> None:
        cur = parent
        for n in nodes:
            if isinstance(n, A.Fork):
                add(cur.add("fork"), n.nodes)
                continue
            info = (evaluated or {}).get(n.name)
            text = f"{n.type} {n.name}"
            if isinstance(n, A.Memory):
                text += f"  size {capacity(info.size)}" if info else f"  size={n.size}"
            if n.spatial:
                dims = info.spatial if info else n.spatial
                text += "  spatial: " + ", ".join(f"{d.name}×{d.fanout}" for d in dims)
            if info and info.area:
                text += f"  area {area(info.area)}"
            cur = cur.add(text)

    add(root, arch.nodes)
    return root


def check_summary(
    spec,
    wl: WorkloadInfo | None,
    evaluated: dict[str, ComponentInfo] | None = None,
    notes=None,
) -> Group:
    """What ``fusemap check`` prints."""
    from .render import text_tree

    parts: list = []
    if wl is not None:
        parts += [workload_table(wl), tensor_table(wl)]
    if spec.arch is not None:
        parts.append(arch_tree(spec.arch, evaluated))
    if spec.mapping is not None:
        parts.append(
            Text.assemble(("Mapping (LoopTree)", "bold"), "\n" + text_tree(spec.mapping, notes))
        )
    return Group(*parts)


def component_table(result: Result) -> Table:
    """Energy, share, latency, buffer usage, area and leak per component."""
    q = Quantities(result)
    comp = Table(title="Per component", title_justify="left")
    for col in ("component", "energy", "share", "latency", "buffer usage", "area", "leak"):
        comp.add_column(col, justify="right" if col != "component" else "left")
    total = result.energy or 1.0
    for c in result.components.values():
        comp.add_row(
            c.name,
            q.energy(c.energy),
            f"{c.energy / total:.1%}",
            q.latency(c.latency),
            usage_text(c.usage_bits, c.size, c.usage),
            area(c.area),
            q.power(c.leak_power),
        )
    return comp


def einsum_table(result: Result) -> Table | Text:
    """Energy, share, latency and the limiting component per Einsum."""
    q = Quantities(result)
    total = result.energy or 1.0
    rows = [
        (
            e.name,
            q.energy(e.energy),
            f"{e.energy / total:.1%}",
            q.latency(e.latency),
            e.bound_by,
            e.compute_unit,
            number(e.operations),
        )
        for e in result.einsums.values()
    ]
    columns = ("Einsum", "energy", "share", "latency", "bound by", "compute unit", "operations")
    return table("Per Einsum", columns, rows, right=("energy", "share", "latency", "operations"))


def tensor_energy_table(result: Result) -> Table:
    """Energy of each tensor's accesses, per memory and in total."""
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
    out = Table(title="Per tensor (access energy by memory)", title_justify="left")
    out.add_column("tensor")
    for m in [*memories, "total", "share"]:
        out.add_column(m, justify="right")
    total = result.energy or 1.0
    for t, row in per.items():
        s = sum(row.values())
        out.add_row(
            t, *(q.energy(row.get(m, 0.0)) for m in memories), q.energy(s), f"{s / total:.1%}"
        )
    return out


def totals_line(result: Result) -> Text:
    """Total energy, latency and area on one line (with the unitless note, if any)."""
    q = Quantities(result)
    line = Text.assemble(
        ("Total energy", "bold"),
        f" {q.energy(result.energy)}   ",
        ("latency", "bold"),
        f" {q.latency(result.latency)}   ",
        ("area", "bold"),
        f" {area(result.area)}",
    )
    note = q.note()
    if note:
        line.append(f"\n({note})")
    return line


def result_tables(result: Result, tensors: bool = True) -> Group:
    """What ``fusemap evaluate`` prints: per component, per Einsum, per tensor, totals."""
    parts: list = [component_table(result), einsum_table(result)]
    if tensors:
        parts.append(tensor_energy_table(result))
    parts.append(totals_line(result))
    return Group(*parts)


def pareto_table(
    points: Sequence, files: Sequence[str] | None = None, title: str = "Energy-latency Pareto front"
) -> Table:
    """One row per mapping of a front: energy, latency, EDP, fused tensors (and its file).

    ``points`` are mapped workloads (``.result`` and ``.fused``)."""
    t = Table(title=title, title_justify="left")
    cols = ["#", "energy", "latency", "EDP", "fused tensors"] + (["mapping file"] if files else [])
    for col in cols:
        t.add_column(col, justify="right" if col in ("#", "energy", "latency", "EDP") else "left")
    for i, m in enumerate(points):
        q = Quantities(m.result)
        edp = m.result.energy * m.result.latency
        unitless = bool(m.result.unitless)
        fused = ", ".join(f"{f.tensor}@{f.memory}" for f in m.fused) or "none"
        row = [
            str(i + 1),
            q.energy(m.result.energy),
            q.latency(m.result.latency),
            number(edp) if unitless else si(edp, "J·s"),
            fused,
        ]
        if files:
            row.append(files[i])
        t.add_row(*row)
    return t


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
    for col in ("tensor", "stages", "elements", "size", "fibers"):
        live.add_column(col)
    for t, v in a.live.items():
        live.add_row(
            t,
            ", ".join(map(str, v.stages)),
            f"{v.fiber_elements:,}",
            capacity(v.fiber_bytes * 8 if v.fiber_bytes is not None else None),
            f"{v.fibers:,}",
        )
    if not a.live:
        live.add_row("none", "", "", "", "")
    return Group(stages, live)


def print_group(group: Group | Table | str) -> None:
    """Print to stdout (never cut when piped)."""
    console().print(group)


def print_warnings(result: Result) -> None:
    """The model's warnings, one line each, on standard error."""
    for line in result.warnings:
        print(f"warning: {line}", file=sys.stderr)
