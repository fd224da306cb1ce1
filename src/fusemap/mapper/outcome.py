"""What the whole-workload mapper answers: the mapping(s) found, each scored by the
model, with the fused tensors, and statistics of what the mapper did."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.passes import PassAnalysis
from ..model.result import Result
from ..spec.mapping import Mapping
from .full_space import FullSpaceCheck
from .space.prefix import SpatialTile, loops_text


@dataclass
class FusedTensor:
    """A shared tensor kept below the top memory: where, and under which loops."""

    tensor: str
    memory: str
    loops: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict:
        """Plain data, for JSON (a spatial loop: its fanout third)."""
        return {
            "tensor": self.tensor,
            "memory": self.memory,
            "loops": [
                [v, int(n), n.where] if isinstance(n, SpatialTile) else [v, int(n)]
                for v, n in self.loops
            ],
        }

    def loops_text(self) -> str:
        """The shared loops, ``var:tile`` each (a spatial loop names its fanout)."""
        return loops_text(self.loops)


@dataclass
class MappedWorkload:
    """One optimal mapping of the whole workload."""

    mapping: Mapping
    result: Result
    order: list[str]
    fused: list[FusedTensor]


@dataclass
class MapStatistics:
    """What the mapper did."""

    pmappings: dict[str, int] = field(default_factory=dict)  # per Einsum, after pruning
    templates: dict[str, int] = field(default_factory=dict)
    distinct_einsums: int = 0
    orders: int = 0
    groups: list[int] = field(default_factory=list)  # per join step (best order)
    joined: list[int] = field(default_factory=list)  # combinations formed per step
    kept: list[int] = field(default_factory=list)  # kept after capacity and pruning
    bounded: list[int] = field(default_factory=list)  # dropped by the last join's cap
    dirty_bound: float | None = None  # objective of the dirty join's mapping
    caps: list[float | None] = field(default_factory=list)  # cap of each join (None: none)
    hosting_templates: list[int] = field(default_factory=list)  # tiled before each join
    pmapping_seconds: dict[str, float] = field(default_factory=dict)  # per table, CPU
    seconds: dict[str, float] = field(default_factory=dict)  # per phase
    peak_mb: float = 0.0  # peak resident memory of a process generating pmappings
    full_space: FullSpaceCheck | None = None  # several fused loops per variable, bounded
    edp_by_energy: bool = False
    """EDP: the energy optimum, proved an EDP optimum by the latency floors
    (:mod:`fusemap.mapper.edp_by_energy`); no EDP tables were made."""
    unchecked: bool = False
    """The check of several fused loops per rank variable was skipped (``map_workload(...,
    check_full_space=False)``): the answer is optimal over the default space only."""
    self_bounded: bool | None = None
    """Whether the first tables, of rows near each Einsum's least (:data:`SELF_BOUND`),
    held the answer (False: more tables were made after them; None: not tried)."""
    self_bounds: list[str | None] = field(default_factory=list)
    """The tables made after the first proved short, in turn: "to the upper bound"
    (every row a mapping as good as one found may use), None (complete)."""

    def as_dict(self) -> dict:
        """Plain data, for JSON."""
        out = dict(self.__dict__)
        out["full_space"] = self.full_space.as_dict() if self.full_space else None
        total = sum(self.joined)
        out["pruned_fraction"] = 1 - sum(self.kept) / total if total else 0.0
        return out


@dataclass
class MapOutcome:
    """The mapper's answer: one mapping, or the energy-latency Pareto front."""

    objective: str
    mappings: list[MappedWorkload]
    statistics: MapStatistics
    passes: dict[str, PassAnalysis] = field(default_factory=dict)
    """Per rank, the passes any mapping makes and the fibers live across them (the
    lower bound beside the result; only ranks where it says something, see
    :func:`fusemap.analysis.passes.pass_bounds`)."""
    notes: list[str] = field(default_factory=list)
    """What the mapper relaxed, e.g. a ``min_usage`` no mapping reaches (the
    highest-usage mappings competed instead)."""

    @property
    def best(self) -> MappedWorkload:
        """The first mapping (the optimum; for ``pareto``, the lowest energy)."""
        return self.mappings[0]
