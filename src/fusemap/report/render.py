"""LoopTree drawings: an indented text tree, SVG/PNG/PDF from fusemap's own layout, and
graphviz DOT source. Storage nodes of one memory are written together; with the model's
numbers (``looptree.annotate``) loops show their iteration counts and fanout usage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..spec import mapping as M
from ..spec.errors import FusemapError
from .io import write_atomic
from .looptree import Annotations, DisplayNode, display_tree

FORMATS = ("svg", "png", "pdf", "dot", "txt")


def label(node: M.MappingTreeNode) -> str:
    """One-line description of a LoopTree node (without the model's numbers)."""
    tree = display_tree(M.Mapping(nodes=[node]))
    return tree.children[0].title if tree.children else node.type


def text_tree(mapping: M.Mapping, notes: Annotations | None = None, tiles: bool = False) -> str:
    """The LoopTree as indented text (splits branch with ├─ / └─).

    With ``tiles`` a storage node also lists each tensor's tile shape and size."""
    lines: list[str] = []

    def chain(node: DisplayNode, indent: str) -> None:
        while True:
            if node.kind not in ("root", "branch"):
                lines.append(f"{indent}{_line(node, tiles)}")
                indent += "  " if not node.is_split else ""
            if node.is_split:
                for i, branch in enumerate(node.children):
                    last = i == len(node.children) - 1
                    lines.append(f"{indent}{'└─' if last else '├─'} {branch.title or 'branch'}")
                    chain(branch, indent + ("   " if last else "│  "))
                return
            if not node.children:
                return
            node = node.children[0]

    tree = display_tree(mapping, notes)
    if mapping.title:
        lines.append(mapping.title)
    chain(tree, "")
    return "\n".join(lines)


def _line(node: DisplayNode, tiles: bool) -> str:
    if node.kind != "storage" or not node.tiles:
        return node.title
    if tiles:
        return f"{node.title}: " + "; ".join(node.details)
    return f"{node.title}  · {node.details[-1]}"


_SHAPES = {"storage": "cylinder", "compute": "oval", "toll": "cds", "split": "triangle"}


def to_dot(mapping: M.Mapping, notes: Annotations | None = None) -> str:
    """Graphviz DOT source: loops as boxes, storage as cylinders, compute as ovals."""
    import pydot

    graph = pydot.Dot("LoopTree", graph_type="digraph", rankdir="TB")
    graph.set_node_defaults(fontname="Helvetica", fontsize="11")
    counter = [0]

    def add(node: DisplayNode, parent: str | None) -> None:
        name = parent
        if node.kind not in ("root", "branch"):
            counter[0] += 1
            name = f"n{counter[0]}"
            shape = _SHAPES.get(node.kind, "box")
            graph.add_node(pydot.Node(name, label=_quote(node.title), shape=shape))
            if parent:
                graph.add_edge(pydot.Edge(parent, name))
        for child in node.children:
            add(child, name)

    add(display_tree(mapping, notes), None)
    return graph.to_string()


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(
    mapping: M.Mapping, out: str | Path, notes: Annotations | None = None, graphviz: bool = False
) -> Path:
    """Draw to ``out``: .svg/.png/.pdf from fusemap's own layout (graphviz's ``dot`` with
    ``graphviz``), .dot the DOT source, .txt the text tree. Returns the path written."""
    from .drawing import draw

    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise FusemapError(f"cannot draw to '{out.name}': use one of .{', .'.join(FORMATS)}")
    if fmt == "dot":
        return write_atomic(out, to_dot(mapping, notes))
    if fmt == "txt":
        return write_atomic(out, text_tree(mapping, notes, tiles=True) + "\n")
    if graphviz:
        return write_atomic(out, _graphviz(to_dot(mapping, notes), fmt))
    return write_atomic(out, draw(display_tree(mapping, notes), out))


def _graphviz(dot_src: str, fmt: str) -> bytes:
    import subprocess

    exe = shutil.which("dot")
    if exe is None:
        raise FusemapError("--graphviz needs graphviz's 'dot' program, which is not installed")
    proc = subprocess.run(
        [exe, f"-T{fmt}"], input=dot_src.encode(), capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise FusemapError(f"graphviz failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout
