"""LoopTree drawings from fusemap's own layout: SVG written directly, PNG/PDF through
matplotlib. No graphviz needed.

The layout is a top-down tree: a chain of nodes stacks vertically, the branches of a
split sit side by side under it. Storage nodes of one memory are one box (see
``looptree.display_tree``); boxes are sized from their text (monospace).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from .looptree import DisplayNode

CHAR_W = 7.0  # px per character at FONT_PX (monospace)
FONT_PX = 11
LINE_H = 14
PAD = 6
V_GAP = 14
H_GAP = 16
MARGIN = 10

STYLE = {  # kind -> (fill, stroke, dashed, rounded)
    "storage": ("#dbeafe", "#1d4ed8", False, True),
    "toll": ("#ede9fe", "#6d28d9", False, True),
    "loop": ("#fef9c3", "#a16207", False, False),
    "spatial": ("#dcfce7", "#15803d", True, False),
    "compute": ("#fce7f3", "#be185d", False, True),
    "split": ("#e5e7eb", "#374151", False, False),
    "other": ("#f3f4f6", "#6b7280", False, False),
}


@dataclass
class Box:
    """One drawn node: top-left corner, size, text lines (the first in bold)."""

    x: float
    y: float
    w: float
    h: float
    kind: str
    lines: list[str]


@dataclass
class Layout:
    """Positions of every box and the edges between them (parent bottom -> child top)."""

    width: float = 0.0
    height: float = 0.0
    boxes: list[Box] = field(default_factory=list)
    edges: list[tuple[float, float, float, float]] = field(default_factory=list)


def box_lines(node: DisplayNode) -> list[str]:
    """The text of a node's box: short lines (a title, then details)."""
    return node.lines or [node.title]


def _size(lines: list[str]) -> tuple[float, float]:
    return max(len(s) for s in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + 2 * PAD


def _width(node: DisplayNode, memo: dict[int, float]) -> float:
    """Width of the subtree hanging from ``node`` (a chain, maybe ending in a split)."""
    if id(node) in memo:
        return memo[id(node)]
    own = _size(box_lines(node))[0] if node.kind not in ("root", "branch") else 0.0
    if node.is_split:
        kids = sum(_width(b, memo) for b in node.children) + H_GAP * (len(node.children) - 1)
        width = max(own, kids)
    else:
        width = max([own] + [_width(c, memo) for c in node.children])
    memo[id(node)] = width
    return width


def layout(tree: DisplayNode) -> Layout:
    """Place every node of ``tree`` (a ``display_tree``)."""
    out = Layout()
    memo: dict[int, float] = {}
    total = _width(tree, memo)

    def place(node: DisplayNode, cx: float, y: float, parent: tuple[float, float] | None) -> float:
        """Draw ``node`` centred on ``cx`` at ``y``; returns the lowest y used."""
        if node.kind in ("root", "branch"):
            bottom = y
            for child in node.children:
                bottom = max(bottom, place(child, cx, y, parent))
            return bottom
        lines = box_lines(node)
        w, h = _size(lines)
        out.boxes.append(Box(cx - w / 2, y, w, h, node.kind, lines))
        if parent is not None:
            out.edges.append((parent[0], parent[1], cx, y))
        anchor = (cx, y + h)
        bottom = y + h
        if node.is_split:
            left = (
                cx
                - (sum(_width(b, memo) for b in node.children) + H_GAP * (len(node.children) - 1))
                / 2
            )
            for branch in node.children:
                bw = _width(branch, memo)
                bottom = max(bottom, place(branch, left + bw / 2, y + h + V_GAP * 1.5, anchor))
                left += bw + H_GAP
            return bottom
        for child in node.children:
            bottom = max(bottom, place(child, cx, y + h + V_GAP, anchor))
        return bottom

    height = place(tree, MARGIN + total / 2, MARGIN, None)
    out.width, out.height = total + 2 * MARGIN, height + MARGIN
    return out


def to_svg(lay: Layout, title: str = "LoopTree") -> str:
    """A standalone SVG document of the layout."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay.width:.0f}" '
        f'height="{lay.height:.0f}" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
        f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT_PX}">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{lay.width:.0f}" height="{lay.height:.0f}" fill="white"/>',
    ]
    for x1, y1, x2, y2 in lay.edges:
        mid = (y1 + y2) / 2
        parts.append(
            f'<path d="M{x1:.1f},{y1:.1f} V{mid:.1f} H{x2:.1f} V{y2:.1f}" fill="none" '
            'stroke="#9ca3af" stroke-width="1"/>'
        )
    for b in lay.boxes:
        fill, stroke, dashed, rounded = STYLE.get(b.kind, STYLE["other"])
        dash = ' stroke-dasharray="4 2"' if dashed else ""
        rx = ' rx="6"' if rounded else ""
        parts.append(
            f'<g class="node {b.kind}"><rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" '
            f'height="{b.h:.1f}" fill="{fill}" stroke="{stroke}"{dash}{rx}/>'
        )
        for i, line in enumerate(b.lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            y = b.y + PAD + (i + 1) * LINE_H - 3
            parts.append(
                f'<text x="{b.x + PAD:.1f}" y="{y:.1f}"{weight} xml:space="preserve">'
                f"{escape(line)}</text>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def to_image(lay: Layout, fmt: str = "png") -> bytes:
    """The layout drawn by matplotlib (``png``, ``pdf``, ...) at 100 px per inch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Rectangle

    dpi = 100
    fig = plt.figure(figsize=(lay.width / dpi, lay.height / dpi), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, lay.width)
    ax.set_ylim(lay.height, 0)
    ax.axis("off")
    for x1, y1, x2, y2 in lay.edges:
        mid = (y1 + y2) / 2
        ax.plot([x1, x1, x2, x2], [y1, mid, mid, y2], color="#9ca3af", linewidth=0.8)
    points = FONT_PX * 72 / dpi
    for b in lay.boxes:
        fill, stroke, dashed, rounded = STYLE.get(b.kind, STYLE["other"])
        dashes = "--" if dashed else "-"
        if rounded:
            rounding = "round,pad=0,rounding_size=6"
            ax.add_patch(
                FancyBboxPatch(
                    (b.x, b.y),
                    b.w,
                    b.h,
                    rounding,
                    facecolor=fill,
                    edgecolor=stroke,
                    linestyle=dashes,
                )
            )
        else:
            ax.add_patch(
                Rectangle((b.x, b.y), b.w, b.h, facecolor=fill, edgecolor=stroke, linestyle=dashes)
            )
        for i, line in enumerate(b.lines):
            ax.text(
                b.x + PAD,
                b.y + PAD + (i + 1) * LINE_H - 3,
                line,
                fontsize=points,
                family="monospace",
                weight="bold" if i == 0 else "normal",
                va="baseline",
            )
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def draw(tree: DisplayNode, out: str | Path) -> bytes:
    """The bytes of ``tree`` drawn in the format of ``out``'s suffix (svg, png, pdf)."""
    lay = layout(tree)
    fmt = Path(out).suffix.lstrip(".").lower()
    if fmt == "svg":
        return to_svg(lay, tree.title).encode()
    return to_image(lay, fmt)
