"""The LoopTree as people read it: storage nodes of one memory together, loops with their
iteration counts and fanout usage, storage nodes with tile shapes and occupancy.

Two things live here:

* :func:`merge_storage` rewrites a mapping so that runs of adjacent ``!Storage`` nodes of
  one memory become one node listing their tensors. The model splits a multi-tensor node
  into one node per tensor, in order, so an *adjacent* run (nothing between the nodes,
  same memory, same ``persistent``, no ``binding``/``text``) gives every Einsum exactly the
  same chain of steps: the same counts, reservations, lifetimes and usage (tested in
  tests/integration/test_looptree.py on random mappings). Nodes separated by a loop are never merged
  (only the last tensor of a node can have its reservation lowered past loops).
* :func:`display_tree` builds the tree the text, SVG/PNG and HTML drawings show, with the
  model's numbers (:func:`annotate`) when a spec is at hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..mapper.space.prefix import SpatialTile, loops_text
from ..spec import mapping as M
from ..spec.errors import FusemapError
from ..units import capacity, percent

# -------------------------------------------------------------------- merging storage


def can_merge(a: M.MappingNode, b: M.MappingNode) -> bool:
    """Whether adjacent nodes ``a`` then ``b`` may be written as one !Storage node."""
    return (
        type(a) is M.Storage
        and type(b) is M.Storage
        and a.component == b.component
        and a.persistent == b.persistent
        and a.binding is None
        and b.binding is None
        and a.text is None
        and b.text is None
        and not set(a.tensors) & set(b.tensors)
    )


def merge_runs(nodes: Sequence[M.MappingNode]) -> list[list[M.MappingNode]]:
    """``nodes`` cut into runs: adjacent mergeable storage nodes together, others alone."""
    runs: list[list[M.MappingNode]] = []
    for node in nodes:
        if runs and all(can_merge(prev, node) for prev in runs[-1]):
            runs[-1].append(node)
        else:
            runs.append([node])
    return runs


def merge_storage(mapping: M.Mapping) -> M.Mapping:
    """A copy of ``mapping`` with adjacent storage nodes of one memory merged (the model
    counts it exactly as the original)."""

    def chain(nodes: Sequence[M.MappingNode]) -> list[M.MappingNode]:
        out: list[M.MappingNode] = []
        for run in merge_runs(nodes):
            if len(run) > 1:
                first = run[0]
                assert isinstance(first, M.Storage)
                out.append(first.model_copy(update={"tensors": _run_tensors(run)}))
            else:
                out.append(one(run[0]))
        return out

    def one(node: M.MappingNode) -> M.MappingNode:
        if isinstance(node, M.Branching):
            if isinstance(node, M.Split):
                kids = [one(k) for k in node.nodes]
            else:
                kids = chain(node.nodes)
            return node.model_copy(update={"nodes": kids})
        return node

    return mapping.model_copy(update={"nodes": chain(mapping.nodes)})


def _run_tensors(run: list[M.MappingNode]) -> list[str]:
    """The tensors of a run of storage nodes, in order (a run of several is all storage)."""
    return [t for n in run if isinstance(n, M.Storage) for t in n.tensors]


# -------------------------------------------------------------------- the model's numbers


@dataclass
class Tile:
    """One tensor's tile held by a storage node."""

    tensor: str
    ranks: tuple[str, ...]
    shape: tuple[int, ...]
    bits: float

    def text(self) -> str:
        shape = "×".join(map(str, self.shape)) or "scalar"
        return f"{self.tensor} {shape} ({capacity(self.bits)})"


@dataclass
class NodeNumbers:
    """What the model says about one mapping node (per Einsum below it)."""

    iterations: dict[str, int] = field(default_factory=dict)  # loops: Einsum -> trips
    used: dict[str, int] = field(default_factory=dict)  # spatial: Einsum -> instances used
    fanout: int = 0  # spatial: instances of the dimension
    tiles: dict[str, Tile] = field(default_factory=dict)  # storage: tensor -> its tile


@dataclass
class Annotations:
    """The model's numbers per mapping node (by ``id``) and the memories' sizes (bits)."""

    nodes: dict[int, NodeNumbers] = field(default_factory=dict)
    sizes: dict[str, float] = field(default_factory=dict)

    def of(self, node: M.MappingNode) -> NodeNumbers | None:
        return self.nodes.get(id(node))


def annotate(spec, mapping: M.Mapping, workload=None, arch=None) -> Annotations:
    """Iteration counts, fanout usage and tiles of every node of ``mapping``.

    Einsums whose branch the model cannot read (a broken mapping) are left out: drawing
    must still work for them."""
    from ..model.capacity import reservations
    from ..model.chains import LoopStep, branch_chains, branch_compute, build_chain
    from ..model.reuse import fanout_usage, tile_counter
    from ..spec.arch_eval import ArchEvaluator
    from ..spec.resolve import resolve_workload

    out = Annotations()
    try:
        workload = workload or resolve_workload(spec)
        arch = arch or ArchEvaluator(spec, workload)
        by_einsum = branch_chains(mapping)
    except FusemapError:
        return out
    for name, nodes in by_einsum.items():
        try:
            flat = arch.flat(name, branch_compute(nodes).component)
            chain = build_chain(nodes, workload.einsum(name), workload, flat)
            used = fanout_usage(chain)
            res = reservations(chain)
        except (FusemapError, KeyError):
            continue
        for comp in flat.path:
            if comp.kind == "memory":
                out.sizes[comp.name] = comp.size
        counter = tile_counter(chain, chain.steps, frozenset())
        for i, step in enumerate(chain.steps):
            if not isinstance(step, LoopStep):
                continue
            num = out.nodes.setdefault(chain.node_ids[i], NodeNumbers())
            dist = counter.dists[i][step.rank_variable]
            num.iterations[name] = max(math.ceil(s / step.tile_shape) for s, _ in dist)
            if step.spatial:
                assert step.component is not None and step.dimension is not None
                dims = flat.component(step.component).spatial
                num.fanout = next((d.fanout for d in dims if d.name == step.dimension), 0)
                num.used[name] = used.get((step.component, step.dimension), 0)
        ranks = {t: tuple(chain.einsum.projections[t]) for t in chain.einsum.tensors}
        for r in res:
            num = out.nodes.setdefault(r.key[0], NodeNumbers())
            old = num.tiles.get(r.tensor)
            if old is None or r.bits > old.bits:
                num.tiles[r.tensor] = Tile(r.tensor, ranks[r.tensor], r.shape, r.bits)
    return out


# -------------------------------------------------------------------- the display tree


@dataclass
class DisplayNode:
    """One box of a LoopTree drawing; ``children`` is the chain below (one) or branches."""

    kind: str  # storage, toll, loop, spatial, compute, split, other
    title: str
    details: list[str] = field(default_factory=list)
    children: list[DisplayNode] = field(default_factory=list)
    tiles: list[Tile] = field(default_factory=list)
    component: str = ""
    bits: float = 0.0  # storage: bits reserved by the node's tiles
    size: float = math.inf  # storage: the memory's size
    einsums: list[str] = field(default_factory=list)  # Einsums computed below
    lines: list[str] = field(default_factory=list)  # short lines for a drawn box

    @property
    def is_split(self) -> bool:
        return self.kind == "split"


def display_tree(mapping: M.Mapping, notes: Annotations | None = None) -> DisplayNode:
    """The drawing's tree: a root, then the chain; storage nodes of one memory merged."""
    notes = notes or Annotations()
    root = DisplayNode("root", mapping.title or "LoopTree")
    _attach(root, mapping.nodes, notes)
    return root


def _attach(parent: DisplayNode, nodes: Sequence[M.MappingNode], notes: Annotations) -> None:
    flat: list[M.MappingNode] = []
    for node in nodes:  # a !Nested inside a chain continues the chain
        if isinstance(node, M.Nested) and not isinstance(node, M.Split):
            flat += _flatten(node)
        else:
            flat.append(node)
    cur = parent
    for run in merge_runs(flat):
        first = run[0]
        if isinstance(first, M.Split):
            split = DisplayNode("split", _split_title(first))
            for child in first.nodes:
                branch = DisplayNode("branch", "")
                _attach(branch, _flatten(child), notes)
                branch.einsums = _einsums(branch)
                branch.title = ", ".join(branch.einsums)
                split.children.append(branch)
            split.einsums = [e for b in split.children for e in b.einsums]
            cur.children.append(split)
            return
        made = _node(run, notes)
        cur.children.append(made)
        cur = made


def _flatten(node: M.MappingNode) -> list[M.MappingNode]:
    if isinstance(node, M.Nested) and not isinstance(node, M.Split):
        out: list[M.MappingNode] = []
        for n in node.nodes:
            out += _flatten(n)
        return out
    return [node]


def _einsums(node: DisplayNode) -> list[str]:
    if node.kind == "compute":
        return node.einsums
    return [e for c in node.children for e in _einsums(c)]


def _split_title(node: M.Split) -> str:
    kind = node.type.lower()
    if isinstance(node, M.Pipeline) and node.overlap:
        kind += " (overlap)"
    return node.text or kind


def _node(run: list[M.MappingNode], notes: Annotations) -> DisplayNode:
    node = run[0]
    num = notes.of(node)
    if isinstance(node, M.Storage):
        tensors = _run_tensors(run)
        tiles = [
            n_.tiles[t]
            for n in run
            if isinstance(n, M.Storage) and (n_ := notes.of(n)) is not None
            for t in n.tensors
            if t in n_.tiles
        ]
        bits = sum(t.bits for t in tiles)
        size = notes.sizes.get(node.component, math.inf)
        title = node.text or f"[{node.component}] {', '.join(tensors)}"
        if node.persistent:
            title += " (persistent)"
        out = DisplayNode("storage", title, component=node.component, tiles=tiles)
        out.bits, out.size = bits, size
        out.details = [t.text() for t in tiles]
        out.lines = [f"[{node.component}]" if not node.text else title]
        if tiles:
            share = (
                f" = {percent(bits / size)} of {capacity(size)}"
                if math.isfinite(size) and size
                else ""
            )
            out.details.append(f"holds {capacity(bits)}{share}")
            out.lines += out.details
        else:
            out.lines += _wrap(", ".join(tensors), 34)
        return out
    if isinstance(node, M.Toll):
        return DisplayNode("toll", node.text or f"toll {node.component}: {', '.join(node.tensors)}")
    if isinstance(node, M.Spatial):
        trips = _range(num.iterations if num else {})
        head = f"spatial-for {node.rank_variable}{trips}"
        where = f"on {node.component}.{node.name}"
        extra = f"tile {node.tile_shape}"
        if num and num.fanout:
            extra += f", {_range(num.used, '')}/{num.fanout} used"
        out = DisplayNode("spatial", node.text or f"{head} {where} ({extra})")
        out.component = node.component
        out.lines = [node.text] if node.text else [head, where, extra]
        return out
    if isinstance(node, M.Temporal):
        trips = _range(num.iterations if num else {})
        head = f"for {node.rank_variable}{trips}"
        out = DisplayNode("loop", node.text or f"{head} (tile {node.tile_shape})")
        out.lines = [node.text] if node.text else [head, f"tile {node.tile_shape}"]
        return out
    if isinstance(node, M.Compute):
        out = DisplayNode("compute", node.text or f"compute {node.einsum} on {node.component}")
        out.einsums = [node.einsum]
        out.component = node.component
        return out
    if isinstance(node, M.Reservation):
        return DisplayNode("other", f"reserve {', '.join(node.purposes)} in {node.resource}")
    return DisplayNode("other", node.text or node.type)


def _range(per_einsum: dict[str, int], sign: str = " ×") -> str:
    """`` ×8`` (or `` ×4..8`` when the Einsums below differ); empty when unknown."""
    values = sorted(set(per_einsum.values()))
    if not values:
        return ""
    if len(values) == 1:
        return f"{sign}{values[0]}"
    return f"{sign}{values[0]}..{values[-1]}"


def _wrap(text: str, width: int) -> list[str]:
    """``text`` cut at spaces into lines of at most ``width`` characters (where possible)."""
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return out + ([line] if line else [])


# -------------------------------------------------------------------- fused tensors


@dataclass
class Fused:
    """A tensor shared between Einsums and kept below the top memory: where, under which
    loops (rank variable, tile). Same fields as the mapper's ``FusedTensor``."""

    tensor: str
    memory: str
    loops: tuple[tuple[str, int], ...]

    def loops_text(self) -> str:
        """The shared loops, ``var:tile`` each (a spatial loop names its fanout)."""
        return loops_text(self.loops)


def fused_tensors(mapping: M.Mapping, workload, top: str | None) -> list[Fused]:
    """The fused tensors of any mapping: each intermediate's outermost (backing) storage
    node, when it is not in the ``top`` memory, with the loops written above it."""
    out: dict[str, Fused] = {}

    def walk(nodes: Sequence[M.MappingNode], loops: tuple[tuple[str, int], ...]) -> None:
        for node in nodes:
            if isinstance(node, M.Split):
                for child in node.nodes:
                    walk([child], loops)
                return
            if isinstance(node, M.Nested):
                walk(node.nodes, loops)
                return
            if isinstance(node, M.Spatial):
                tile = SpatialTile.on(node.tile_shape, node.component, node.name)
                loops = (*loops, (node.rank_variable, tile))
            elif isinstance(node, M.Temporal):
                loops = (*loops, (node.rank_variable, node.tile_shape))
            if isinstance(node, M.Storage):
                for t in node.tensors:
                    info = workload.tensors.get(t)
                    if info is None or not info.is_intermediate or t in out:
                        continue
                    out[t] = Fused(t, node.component, loops)

    walk(mapping.nodes, ())
    return [f for f in out.values() if f.memory != top]


def top_memory(spec) -> str | None:
    """The arch's outermost memory (where unfused tensors live)."""
    arch = getattr(spec, "arch", None)
    if arch is None:
        return None
    for leaf in arch.leaves():
        if leaf.type == "Memory":
            return leaf.name
    return None
