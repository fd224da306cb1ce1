"""LoopTree drawings: an indented text tree, and graphviz (DOT, SVG when ``dot`` exists)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..spec import mapping as M
from .io import write_atomic


def label(node: M.MappingNode) -> str:
    """One-line description of a LoopTree node."""
    if node.text:
        return node.text
    if isinstance(node, M.Storage):
        return f"[{node.component}] {', '.join(node.tensors)}" + (
            " (persistent)" if node.persistent else ""
        )
    if isinstance(node, M.Toll):
        return f"toll {node.component}: {', '.join(node.tensors)}"
    if isinstance(node, M.Spatial):
        return f"spatial-for {node.rank_variable} step {node.tile_shape} on {node.component}.{node.name}"
    if isinstance(node, M.Temporal):
        return f"for {node.rank_variable} step {node.tile_shape}"
    if isinstance(node, M.Compute):
        return f"compute {node.einsum} on {node.component}"
    if isinstance(node, M.Reservation):
        return f"reserve {', '.join(node.purposes)} in {node.resource}"
    if isinstance(node, M.Split):
        return node.type.lower()
    return node.type  # type: ignore[attr-defined]


def text_tree(mapping: M.Mapping) -> str:
    """The LoopTree as indented text (splits branch with ├─ / └─)."""
    lines: list[str] = []

    def chain(nodes: list[M.MappingNode], indent: str) -> None:
        for node in nodes:
            if isinstance(node, M.Nested):
                chain(node.nodes, indent)
                continue
            lines.append(f"{indent}{label(node)}")
            if isinstance(node, M.Split):
                for i, child in enumerate(node.nodes):
                    last = i == len(node.nodes) - 1
                    lines.append(f"{indent}{'└─' if last else '├─'} branch {i + 1}")
                    inner = child.nodes if isinstance(child, M.Nested) else [child]
                    chain(inner, indent + ("   " if last else "│  "))
                return
            indent += "  "

    if mapping.title:
        lines.append(mapping.title)
    chain(mapping.nodes, "")
    return "\n".join(lines)


_SHAPES = {"Storage": "cylinder", "Compute": "oval", "Toll": "cds"}


def to_dot(mapping: M.Mapping) -> str:
    """Graphviz DOT source: loops as boxes, storage as cylinders, compute as ovals."""
    import pydot

    graph = pydot.Dot("LoopTree", graph_type="digraph", rankdir="TB")
    graph.set_node_defaults(fontname="Helvetica", fontsize="11")
    counter = [0]

    def add(node: M.MappingNode) -> str:
        counter[0] += 1
        name = f"n{counter[0]}"
        shape = _SHAPES.get(node.type, "box")  # type: ignore[attr-defined]
        if isinstance(node, M.Split):
            shape = "triangle"
        graph.add_node(pydot.Node(name, label=_quote(label(node)), shape=shape))
        return name

    def chain(nodes: list[M.MappingNode], parent: str | None) -> None:
        for node in nodes:
            if isinstance(node, M.Nested):
                chain(node.nodes, parent)
                return
            name = add(node)
            if parent:
                graph.add_edge(pydot.Edge(parent, name))
            parent = name
            if isinstance(node, M.Split):
                for child in node.nodes:
                    chain(child.nodes if isinstance(child, M.Nested) else [child], name)
                return

    chain(mapping.nodes, None)
    return graph.to_string()


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(mapping: M.Mapping, out: str | Path) -> tuple[Path, bool]:
    """Draw to ``out`` (.svg/.png/.pdf with graphviz, .dot always, else text).

    Returns the path written and whether graphviz drew it. Without the ``dot`` program,
    the DOT source goes beside ``out`` and the caller shows the text drawing.
    """
    out = Path(out)
    dot_src = to_dot(mapping)
    fmt = out.suffix.lstrip(".").lower()
    if fmt == "dot":
        return write_atomic(out, dot_src), True
    if fmt == "txt":
        return write_atomic(out, text_tree(mapping) + "\n"), True
    exe = shutil.which("dot")
    if exe is None:
        return write_atomic(out.with_suffix(".dot"), dot_src), False
    import subprocess

    proc = subprocess.run(
        [exe, f"-T{fmt}"], input=dot_src.encode(), capture_output=True, check=False
    )
    if proc.returncode != 0:
        return write_atomic(out.with_suffix(".dot"), dot_src), False
    return write_atomic(out, proc.stdout), True
