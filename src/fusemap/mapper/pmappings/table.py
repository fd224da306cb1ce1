"""The pmapping table of one Einsum: every surviving pmapping in columns.

A row is one pmapping: a template and a tile shape. The table holds its objectives
(energy, latency), its reservations per bounded memory, and its compatibility (for each
shared tensor, the backing memory and the loops above it); :meth:`PmappingTable.mapping`
turns any row into a LoopTree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ...spec import mapping as M
from ..space.interner import PrefixInterner
from ..space.prefix import Compatibility, SpatialTile
from ..space.templates import Template
from ..tiling.columns import Column
from ..tiling.gap_orders import ordered_as_prefix
from ..tiling.result import TemplateResult, renamed_result
from ..tiling.uneven import spatial_tiles
from .renamed import RenamedInterner, RenamedResults

OBJECTIVES = ("energy", "latency", "edp")


@dataclass
class PmappingStats:
    """How much of the mapspace was seen, and how much survived."""

    templates: int = 0
    stages: int = 0  # search stages run (templates share the stages of common prefixes)
    tile_shapes_evaluated: int = 0  # partial tile shapes costed by the search
    tile_shapes_valid: int = 0  # of those, within every capacity
    pareto: int = 0  # rows of the final table
    seconds: float = 0.0
    peak_mb: float = 0.0  # peak resident memory of the process that made it, once done

    def as_dict(self) -> dict[str, float]:
        """Plain numbers, for JSON."""
        return dict(self.__dict__)


@dataclass
class FusionColumns:
    """Per-row data the FFM join needs (pmappings generated with fusion on)."""

    seq: np.ndarray  # (R,) interned fused prefix
    buckets: dict[str, np.ndarray]  # memory -> (R, K+1) private reservations by loop depth
    interner: PrefixInterner
    shared: frozenset[str]  # the Einsum's tensors shared with other Einsums
    top: dict[str, str]  # shared tensor -> memory backing it when unfused

    def compatibility(self, i: int) -> tuple[Compatibility, ...]:
        """Per shared tensor (sorted by name): backing memory and loops above it."""
        return self.interner.compatibility(int(self.seq[i]), self.shared, self.top)

    def take(self, keep: np.ndarray) -> FusionColumns:
        """The rows ``keep``."""
        return replace(
            self, seq=self.seq[keep], buckets={m: b[keep] for m, b in self.buckets.items()}
        )


@dataclass
class PmappingTable:
    """The Pareto-optimal pmappings of one Einsum."""

    einsum: str
    results: Sequence[TemplateResult]  # a list (a renamed table's: a view, RenamedResults)
    template: np.ndarray  # (R,) index into ``results``
    row: np.ndarray  # (R,) row within that template's result
    energy: np.ndarray
    latency: np.ndarray
    reservations: dict[str, np.ndarray]  # memory -> bits, for memories that can overflow
    latency_counts: dict[Column, np.ndarray] = field(default_factory=dict)  # see TemplateResult
    stats: PmappingStats = field(default_factory=PmappingStats)
    fusion: FusionColumns | None = None  # with fusion: what the join needs per row
    notes: list[str] = field(default_factory=list)  # what the search relaxed (min_usage)
    floors: dict[tuple, float] = field(default_factory=dict)
    """Per template (:func:`template_key`): a lower bound of its pmappings' energy."""
    floors_latency: dict[tuple, float] = field(default_factory=dict)
    """Searched with latency: per template of :attr:`floors`, a lower bound of its
    pmappings' latency."""
    skipped: list[Template] = field(default_factory=list)
    """With floors: the templates ``only`` left out (in the order they were made)."""
    full_floors: dict[tuple, float] = field(default_factory=dict)
    """Per template with two loop gaps or more above its deepest fused node: its least
    energy over the whole fused space if at most ``full_ceiling``, else +inf
    (:mod:`fusemap.mapper.full_space`; empty when not asked)."""
    complete_to: float = np.inf
    """Every pmapping of energy at most this is in the table (a self-bounded search,
    ``generate_pmappings(self_bound=...)``, left out costlier ones)."""
    full_ceiling: float = -np.inf
    full_floors_latency: dict[tuple, float] = field(default_factory=dict)
    """Latency and EDP objectives: per template of :attr:`full_floors` (then exact, no
    ceiling), its least latency over the whole fused space."""

    def __len__(self) -> int:
        return len(self.energy)

    def best(self, objective: str = "energy") -> int:
        """Index of the best row (ties: the other objective, then table order)."""
        if len(self) == 0:
            raise IndexError("no pmapping")
        if objective == "energy":
            keys = (self.latency, self.energy)
        elif objective == "latency":
            keys = (self.energy, self.latency)
        elif objective == "edp":
            keys = (self.energy, self.energy * self.latency)
        else:
            raise ValueError(f"unknown objective '{objective}' (use {', '.join(OBJECTIVES)})")
        return int(np.lexsort(keys)[0])

    def take(self, rows: np.ndarray) -> PmappingTable:
        """The table of ``rows`` (in that order; repeats allowed)."""
        return replace(
            self,
            template=self.template[rows],
            row=self.row[rows],
            energy=self.energy[rows],
            latency=self.latency[rows],
            reservations={m: v[rows] for m, v in self.reservations.items()},
            latency_counts={m: v[rows] for m, v in self.latency_counts.items()},
            fusion=None if self.fusion is None else self.fusion.take(rows),
        )

    def mapping(self, i: int) -> M.Mapping:
        """The LoopTree of row ``i``."""
        tree = materialize(self.results[int(self.template[i])], int(self.row[i]))
        if self.fusion is None:
            return tree
        return ordered_as_prefix(tree, self.fusion.interner.prefixes[int(self.fusion.seq[i])])

    def renamed(
        self, einsum: str, tensors: dict[str, str], variables: dict[str, str] | None = None
    ) -> PmappingTable:
        """The same table for an identical Einsum with other tensor (and rank variable)
        names."""
        var = variables or {}

        def tiles(r: TemplateResult) -> TemplateResult:
            return renamed_result(r, einsum, tensors, var)

        fusion = self.fusion
        if fusion is not None:
            fusion = replace(
                fusion,  # the same prefix ids, in the base's interner renamed
                interner=RenamedInterner(fusion.interner, tensors, var),
                shared=frozenset(tensors[t] for t in fusion.shared),
                top={tensors[t]: m for t, m in fusion.top.items()},
            )
        results = RenamedResults(self.results, tiles)
        out = replace(self, einsum=einsum, results=results, fusion=fusion)
        # Row i is this table's row i renamed (the relaxed join reads compatibilities
        # off the first table, :mod:`fusemap.mapper.join.completion`).
        out.__dict__["renamed_from"] = (self, tensors, var)
        return out

    def compatibility(self, i: int, shared: frozenset[str]) -> list[Compatibility]:
        """Per shared tensor of the Einsum: backing memory and the loops above it."""
        return compatibility_of(self.mapping(i), shared)


def empty_table(einsum: str) -> PmappingTable:
    """A table of no row."""
    empty = np.zeros(0)
    return PmappingTable(einsum, [], empty.astype(int), empty.astype(int), empty, empty, {})


def compatibility_of(mapping: M.Mapping, shared: frozenset[str]) -> list[Compatibility]:
    """Per shared tensor: backing memory and the loops above it, in order."""
    out = []
    for t in sorted(shared):
        loops: list[tuple[str, int]] = []
        for node in mapping.nodes:
            if isinstance(node, M.Storage) and t in node.tensors:
                out.append(Compatibility(t, node.component, tuple(loops)))
                break
            if isinstance(node, M.Spatial):
                tile = SpatialTile.on(node.tile_shape, node.component, node.name)
                loops.append((node.rank_variable, tile))
            elif isinstance(node, M.Temporal):
                loops.append((node.rank_variable, node.tile_shape))
    return out


def materialize(res: TemplateResult, row: int) -> M.Mapping:
    """The canonical LoopTree of one tile shape of a template."""
    t = res.template
    relevance, variables = res.relevance, res.variables
    nodes: list = []
    trail = res.trail(row)
    for j, holder in enumerate(t.holders):
        here, mid = trail[j]
        looped = [k for k, _ in enumerate(variables) if mid[k] < here[k]]
        rank = {"relevant": 0, "partial": 1, "irrelevant": 2}
        if holder.virtual:  # no storage node: only the loops it exposes
            looped.sort()
        else:
            nodes.append(M.Storage(tensors=[holder.tensor], component=holder.component))
            looped.sort(key=lambda k: (rank[relevance[holder.tensor][variables[k]]], k))
        for k in looped:
            nodes.append(M.Temporal(rank_variable=variables[k], tile_shape=int(mid[k])))
        loops = [s for s in t.spatial if s.slot == j + 1]
        below = trail[j + 1][0] if j + 1 < len(trail) else np.ones(len(variables), dtype=np.int64)
        for s, tile in zip(loops, spatial_tiles(loops, variables, mid, below), strict=True):
            nodes.append(
                M.Spatial(
                    rank_variable=s.var, tile_shape=tile, name=s.dimension, component=s.component
                )
            )
    nodes.append(M.Compute(einsum=t.einsum, component=t.compute))
    return M.Mapping(nodes=nodes)
