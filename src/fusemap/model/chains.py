"""One validated root-to-Compute chain per Einsum, taken from a LoopTree mapping.

A chain keeps the loops, the storage and toll nodes of the Einsum's own tensors (a
multi-tensor storage node becomes one node per tensor, in order) and the compute leaf.
Every name is checked against the workload and the flattened architecture here, so the
counting code can trust what it gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..spec import mapping as M
from ..spec.arch_eval import ComponentInfo, FlatArch
from ..spec.errors import FusemapError, InvalidMappingError, Location, SpecError
from ..spec.resolve import EinsumInfo, WorkloadInfo


@dataclass(frozen=True)
class LoopStep:
    """A temporal or spatial loop of the chain."""

    rank_variable: str
    tile_shape: int
    spatial: bool
    component: str | None = None  # spatial only: the arch node with the fanout
    dimension: str | None = None  # spatial only: the fanout dimension name
    level: int = -1  # spatial only: arch depth of the fanout component
    node_id: int = 0  # identity of the mapping node (shared prefixes share it)


@dataclass(frozen=True)
class HolderStep:
    """One tensor held in a memory (storage) or charged by a toll."""

    tensor: str
    component: str
    level: int  # arch depth of the component
    toll: bool
    persistent: bool
    node_id: int  # identity of the mapping node this came from


@dataclass(frozen=True)
class ComputeStep:
    """The leaf."""

    component: str
    level: int


Step = LoopStep | HolderStep | ComputeStep


@dataclass
class Chain:
    """The validated chain of one Einsum with its evaluated architecture."""

    einsum: EinsumInfo
    arch: FlatArch
    steps: list[Step]
    node_ids: list[int] = field(default_factory=list)  # mapping-node identity per step
    workload_bits: dict[str, float] = field(default_factory=dict)  # tensor -> bits per value
    cache: dict = field(default_factory=dict, repr=False)  # memo for the counting code
    where: dict[int, Location] = field(default_factory=dict, repr=False)  # node id -> source
    instances: float = 1.0  # workload x Einsum n_instances (persistent tiles hold them all)

    def line_of(self, node_id: int, before: str = " (", after: str = ")") -> str:
        """``(line N)`` when the mapping node was read from a file, else nothing."""
        found = self.where.get(node_id)
        return f"{before}line {found.line}{after}" if found is not None and found.line else ""

    @property
    def compute(self) -> ComputeStep:
        """The compute leaf."""
        step = self.steps[-1]
        assert isinstance(step, ComputeStep)
        return step

    def holders(self, tensor: str) -> list[tuple[int, HolderStep]]:
        """(position, holder) of ``tensor``, top to bottom."""
        return [
            (i, s)
            for i, s in enumerate(self.steps)
            if isinstance(s, HolderStep) and s.tensor == tensor
        ]


def branch_chains(mapping: M.Mapping) -> dict[str, list[M.MappingNode]]:
    """Einsum name -> its root-to-Compute node list; each Einsum must appear once."""
    out: dict[str, list[M.MappingNode]] = {}
    for branch in mapping.branches():
        leaf = branch[-1] if branch else None
        if not isinstance(leaf, M.Compute):
            raise InvalidMappingError(
                "a branch of the mapping does not end in a !Compute node "
                f"(it ends in {'nothing' if leaf is None else '!' + leaf.type})"
            )
        for node in branch[:-1]:
            if isinstance(node, M.Compute):
                raise InvalidMappingError(
                    f"!Compute for Einsum {node.einsum} must be the last node of its branch"
                )
        if leaf.einsum in out:
            raise InvalidMappingError(f"Einsum {leaf.einsum} has two !Compute nodes")
        out[leaf.einsum] = branch
    return out


def branch_compute(branch: list[M.MappingNode]) -> M.Compute:
    """The !Compute leaf of a branch that :func:`branch_chains` returned (it checked it)."""
    leaf = branch[-1]
    assert isinstance(leaf, M.Compute)
    return leaf


def build_chain(
    nodes: list[M.MappingNode],
    einsum: EinsumInfo,
    workload: WorkloadInfo,
    arch: FlatArch,
    where: dict[int, Location] | None = None,
) -> Chain:
    """Validate the nodes of one branch and turn them into a :class:`Chain`.

    ``where`` (mapping node id -> where it was written) locates the errors."""
    levels = {c.name: i for i, c in enumerate(arch.path)}
    where = where or {}
    steps: list[Step] = []
    ids: list[int] = []
    for node in nodes:
        try:
            made = _node_steps(node, einsum, workload, arch, levels)
        except FusemapError as err:
            raise err.located(where.get(id(node), Location())) from None
        steps += made
        ids += [id(node)] * len(made)
    bits = {t: workload.tensors[t].bits_per_value for t in einsum.tensors}
    instances = workload.n_instances * einsum.n_instances
    chain = Chain(einsum, arch, steps, ids, bits, where=where, instances=instances)
    _check_tiles(chain)
    for tensor in einsum.tensors:  # every tensor's view must keep its tiles in order
        linearize(chain, tensor)
    return chain


_POSITIONS: dict[int, tuple[Any, dict[str, int]]] = {}
"""Storage node id -> (the node, tensor -> position): the top node of a large workload
lists every tensor; checking it once, not once per Einsum, keeps chains linear."""


def _held(node: Any, einsum: EinsumInfo, workload: WorkloadInfo) -> list[str]:
    """The Einsum's tensors that ``node`` holds, in the node's order (names checked)."""
    cached = _POSITIONS.get(id(node))
    if cached is None or cached[0] is not node or len(cached[1]) != len(node.tensors):
        for t in node.tensors:
            if t not in workload.tensors:
                raise SpecError(
                    f"unknown tensor '{t}' in !{node.type} at {node.component}"
                    + _suggest(t, workload.tensors)
                )
        positions = {t: i for i, t in reversed(list(enumerate(node.tensors)))}
        if len(positions) != len(node.tensors):  # a tensor listed twice: held twice
            mine = set(einsum.tensors)
            return [t for t in node.tensors if t in mine]
        if len(_POSITIONS) > 10_000:
            _POSITIONS.clear()
        _POSITIONS[id(node)] = cached = (node, positions)
    positions = cached[1]
    return sorted((t for t in set(einsum.tensors) if t in positions), key=positions.__getitem__)


def _node_steps(
    node: M.MappingNode,
    einsum: EinsumInfo,
    workload: WorkloadInfo,
    arch: FlatArch,
    levels: dict[str, int],
) -> list[Step]:
    """The steps one mapping node contributes to the chain of ``einsum``."""
    out: list[Step] = []
    if isinstance(node, (M.Storage, M.Toll)):
        comp = _component(arch, levels, node.component, einsum)
        want = "toll" if isinstance(node, M.Toll) else "memory"
        if comp.kind != want:
            raise SpecError(
                f"!{node.type} names {node.component}, which is a {comp.kind}, not a {want}"
            )
        for t in _held(node, einsum, workload):
            out.append(
                HolderStep(
                    t,
                    node.component,
                    levels[node.component],
                    isinstance(node, M.Toll),
                    node.persistent,
                    id(node),
                )
            )
    elif isinstance(node, (M.Temporal, M.Spatial)):
        var = node.rank_variable
        if var not in einsum.bounds:
            raise InvalidMappingError(
                f"loop over '{var}' above Einsum {einsum.name}, which has no such rank "
                f"variable (it has {', '.join(einsum.rank_variables)})"
            )
        if isinstance(node, M.Spatial):
            comp = _component(arch, levels, node.component, einsum)
            if not any(d.name == node.name for d in comp.spatial):
                raise SpecError(
                    f"!Spatial names dimension '{node.name}' of {node.component}, which has "
                    f"{'dimensions ' + ', '.join(d.name for d in comp.spatial) if comp.spatial else 'no spatial fanout'}"
                )
            out.append(
                LoopStep(
                    var,
                    node.tile_shape,
                    True,
                    node.component,
                    node.name,
                    levels[node.component],
                    id(node),
                )
            )
        else:
            out.append(LoopStep(var, node.tile_shape, False, node_id=id(node)))
    elif isinstance(node, M.Compute):
        comp = _component(arch, levels, node.component, einsum)
        if comp.kind != "compute":
            raise SpecError(f"!Compute names {node.component}, which is not a !Compute unit")
        out.append(ComputeStep(node.component, levels[node.component]))
    # Reservations and text boxes do not affect counting.
    return out


def _component(
    arch: FlatArch, levels: dict[str, int], name: str, einsum: EinsumInfo
) -> ComponentInfo:
    if name not in levels:
        raise SpecError(
            f"component '{name}' is not on the architecture path to {arch.compute} "
            f"(used by Einsum {einsum.name}); the path is {' -> '.join(levels)}"
        )
    return arch.path[levels[name]]


def _suggest(name: str, names) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _check_tiles(chain: Chain) -> None:
    """Tile shapes shrink top to bottom; the compute leaf is one operation."""
    shape = dict(chain.einsum.bounds)
    for step in chain.steps:
        if isinstance(step, LoopStep):
            if step.tile_shape > shape[step.rank_variable]:
                raise InvalidMappingError(
                    f"Einsum {chain.einsum.name}: loop over '{step.rank_variable}' has tile_shape "
                    f"{step.tile_shape}, larger than the {shape[step.rank_variable]} it splits",
                    chain.where.get(step.node_id),
                )
            shape[step.rank_variable] = step.tile_shape
    left = {v: s for v, s in shape.items() if s > 1}
    if left:
        raise InvalidMappingError(
            f"Einsum {chain.einsum.name}: the compute leaf must be one operation, but "
            + ", ".join(f"'{v}' still spans {s}" for v, s in left.items())
            + " (add loops with tile_shape: 1)",
            chain.where.get(chain.node_ids[-1]) if chain.node_ids else None,
        )


def linearize(chain: Chain, tensor: str) -> list[LoopStep | HolderStep | ComputeStep]:
    """The chain seen by one tensor: its holders, all loops, spatial loops moved down.

    The tensor's holders (and the compute leaf) cut the loops into runs. A temporal loop
    stays in its run; a spatial loop moves to the run just above the first holder of the
    tensor (or the compute leaf) at or below its fanout's level in the architecture.
    Within a run the loops keep the order in which they are written, so a spatial loop
    moves past the tensor's holders only, never past a loop of its own run. Two loops over
    the same rank variable that indexes the tensor must not end up in the other order
    (the tiles would be cut the wrong way round): that raises ``InvalidMappingError``.
    """
    key = ("linear", tensor)
    found = chain.cache.get(key)
    if found is not None:
        return found
    base = [s for s in chain.steps if not (isinstance(s, HolderStep) and s.tensor != tensor)]
    stops = [i for i, s in enumerate(base) if not isinstance(s, LoopStep)]
    run_of: dict[int, int] = {}  # position of a loop in base -> index of the stop below it
    k = 0
    for i, s in enumerate(base):
        if not isinstance(s, LoopStep):
            k += 1
            continue
        run = k
        if s.spatial:
            while base[stops[run]].level < s.level:
                run += 1
        run_of[i] = run
    _check_loop_order(chain, tensor, base, stops, run_of)
    out: list = []
    for run, stop in enumerate(stops):
        out += [base[i] for i in sorted(run_of) if run_of[i] == run]
        out.append(base[stop])
    chain.cache[key] = out
    return out


def _check_loop_order(
    chain: Chain, tensor: str, base: list, stops: list[int], run_of: dict[int, int]
) -> None:
    """Two loops over one indexing rank variable may not swap across a holder."""
    loops = sorted(run_of)
    for a in loops:
        upper = base[a]
        if not upper.spatial or chain.einsum.relevance(tensor, upper.rank_variable) == "irrelevant":
            continue
        for b in loops:
            lower = base[b]
            if b > a and lower.rank_variable == upper.rank_variable and run_of[b] < run_of[a]:
                holder = base[stops[run_of[b]]]
                raise InvalidMappingError(
                    f"Einsum {chain.einsum.name}: the !Spatial loop over "
                    f"'{upper.rank_variable}' ({upper.component}.{upper.dimension}) is written "
                    f"above the {_loop_name(lower)} loop over '{lower.rank_variable}'"
                    f"{chain.line_of(lower.node_id)}, but its fanout lies below "
                    f"{_holder_name(holder)}{chain.line_of(holder.node_id)} between them, so "
                    f"for tensor {tensor} it would apply below that loop; write the spatial "
                    "loop below that storage node",
                    chain.where.get(upper.node_id),
                )


def _loop_name(loop: LoopStep) -> str:
    return "!Spatial" if loop.spatial else "!Temporal"


def _holder_name(holder: HolderStep) -> str:
    kind = "!Toll" if holder.toll else "!Storage"
    return f"the {kind} of {holder.tensor} in {holder.component}"
