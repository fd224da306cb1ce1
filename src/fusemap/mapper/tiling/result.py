"""What the tile-shape search leaves for one template: objectives and the DP trail."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..distinct import sorted_distinct
from ..space.spatial import SpatialLoop
from ..space.templates import Holder, Template
from .columns import Column


@dataclass
class TemplateResult:
    """Surviving tile shapes of one template, with their objectives and the DP trail."""

    template: Template
    energy: np.ndarray  # (R,) energy, leak included
    latency: np.ndarray  # (R,)
    reservations: dict[str, np.ndarray]  # memory -> (R,) bits (memories that can overflow)
    stage_sizes: list[np.ndarray]  # per chain position: (rows, V) tile sizes above the node
    stage_mids: list[np.ndarray]  # per gap: (rows of next stage, V) sizes after its loops
    stage_parents: list[np.ndarray]  # per stage > 0: row of the stage above
    variables: list[str] = field(default_factory=list)  # column order of the size arrays
    relevance: dict[str, dict[str, str]] = field(default_factory=dict)  # tensor -> var -> kind
    latency_counts: dict[Column, np.ndarray] = field(default_factory=dict)
    """Per-instance counts behind the latency, by column: sums of calls / throughput of a
    component, calls of one action (a component with its own ``total_latency``), or the
    busiest instance's operations (:class:`~.columns.Column`)."""
    seq: np.ndarray | None = None
    """Fusion: per row, the interned fused prefix (loops and fused backing nodes)."""
    buckets: dict[str, np.ndarray] = field(default_factory=dict)
    """Fusion: memory -> (R, K+1) private reservations by loop depth (last column:
    below every fused backing node); fused backing nodes are left out (shared)."""
    searched_least: tuple[float, float] | None = None
    """Least (energy, latency) of the rows as searched (+inf: none; latency nan: left
    unknown), kept when rows are dropped (:meth:`compact`): floors of every tile shape
    of the template the search kept, whatever pruning across templates takes later."""

    def __post_init__(self) -> None:
        if self.searched_least is None:
            if self.rows:
                self.searched_least = (float(self.energy.min()), float(self.latency.min()))
            else:
                self.searched_least = (np.inf, np.inf)

    @property
    def least_energy(self) -> float:
        """Least energy of the rows as searched (+inf: none)."""
        assert self.searched_least is not None
        return self.searched_least[0]

    @property
    def least_latency(self) -> float:
        """Least latency of the rows as searched (+inf: none; nan: left unknown)."""
        assert self.searched_least is not None
        return self.searched_least[1]

    @property
    def rows(self) -> int:
        """Number of surviving tile shapes."""
        return len(self.energy)

    def compact(self, rows: np.ndarray) -> TemplateResult:
        """Only the final ``rows`` (sorted, unique) and the trail they need: what a table
        keeps of a template (much less to hold and to send back from a worker)."""
        sizes, mids, parents = (
            list(self.stage_sizes),
            list(self.stage_mids),
            list(self.stage_parents),
        )
        keep = rows
        for j in range(len(mids), 0, -1):
            sizes[j], mids[j - 1] = sizes[j][keep], mids[j - 1][keep]
            par = parents[j - 1][keep]
            keep = sorted_distinct(par)
            parents[j - 1] = np.searchsorted(keep, par)
        sizes[0] = sizes[0][keep]
        pick = {m: v[rows] for m, v in self.reservations.items()}
        return TemplateResult(
            self.template, self.energy[rows], self.latency[rows], pick, sizes, mids,
            parents, self.variables, self.relevance,
            {n: v[rows] for n, v in self.latency_counts.items()},
            None if self.seq is None else self.seq[rows],
            {m: b[rows] for m, b in self.buckets.items()},
            self.searched_least,
        )  # fmt: skip

    def trail(self, row: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(sizes at node j, sizes after gap j) for every node, for one final row."""
        here, mids = self.gap_tiles(np.array([row]))
        return [(h[0], m[0]) for h, m in zip(here, mids, strict=True)]

    def gap_tiles(self, rows: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per gap: the (rows, variables) tiles above its loops and below them, for some
        final rows (the DP trail walked up once)."""
        here: list[np.ndarray] = []
        mids: list[np.ndarray] = []
        r = np.asarray(rows, dtype=np.int64)
        for j in range(len(self.stage_mids), 0, -1):  # bottom up, then reversed
            mids.append(self.stage_mids[j - 1][r])
            r = self.stage_parents[j - 1][r]
            here.append(self.stage_sizes[j - 1][r])
        return here[::-1], mids[::-1]


def renamed_result(
    result: TemplateResult, einsum: str, tensors: dict[str, str], variables: dict[str, str]
) -> TemplateResult:
    """The result of the same template of an Einsum equal up to tensor (and rank
    variable) names; the fused prefix ids ``seq`` as they are (a renamed table reads
    them through a renaming view of its base's interner, ``renamed.RenamedInterner``)."""

    def v(name: str) -> str:
        return variables.get(name, name)

    t = result.template
    holders = tuple(
        h if h.virtual else Holder(tensors[h.tensor], h.component, h.level, h.backing)
        for h in t.holders
    )
    spatial = tuple(
        SpatialLoop(s.component, s.dimension, s.level, v(s.var), s.trips, s.slot) for s in t.spatial
    )
    blocked = frozenset((g, v(x)) for g, x in t.blocked)
    template = replace(t, einsum=einsum, holders=holders, spatial=spatial, blocked=blocked)
    relevance = {
        tensors[k]: {v(x): kind for x, kind in d.items()} for k, d in result.relevance.items()
    }
    names = [v(x) for x in result.variables]
    return replace(result, template=template, relevance=relevance, variables=names)
