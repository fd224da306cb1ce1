"""Which fused mappings respect the data dependencies, not only the capacities.

The model counts data movement; it does not check that a value is complete when it is
read. Two fusions can break that, and the join rules them out (``docs/ffm.md``):

* **Across a pass boundary.** An Einsum B that *reduces* a rank variable ``v`` (``v``
  iterates B but indexes none of its outputs: a barrier of the pass analysis over the
  rank of ``v``, ``fusemap.analysis.passes``) has its output complete only after every
  ``v``. A reader C of that output must not share a loop over ``v`` with B: under the
  shared loop C would read a partial reduction (SN = exp(QK - GM) under an ``m`` loop
  with GM = max over m reads a partial max). Any chain of readers passes through a
  direct reader first, so checking direct readers is exact.
* **A recurrence through several Einsums.** C reads ``T[v]`` that a later Einsum P of
  the order writes at ``v + 1`` (SPD reads RD[m1], RD[m1+1] = SLD + SPD). C's ``v``
  needs P's previous ``v``, so C and P must share a loop over ``v`` of tile 1 (unless
  ``v`` has one value). A self-recurrence (RM reads RM) needs nothing.

The join keeps, per group of partial mappings, a small state: ``("partial", d, T)`` (T
is partial under the shared loop at depth ``d``) and ``("await", d, T)`` (the loop at
depth ``d``, of tile 1, must stay shared until T's writer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...spec.resolve import WorkloadInfo
from ..space.prefix import SpatialTile

State = frozenset[tuple[str, int, str]]
EMPTY: State = frozenset()


@dataclass(frozen=True)
class FusionRules:
    """The dependency facts of a workload that fusion must respect."""

    reduces: dict[str, frozenset[str]]
    """Einsum -> rank variables it fully reduces (pass barriers over their ranks)."""
    reads: dict[str, frozenset[str]]
    """Einsum -> tensors it reads (a recurrence reads its own output)."""
    writes: dict[str, frozenset[str]]
    recurrences: dict[tuple[str, str], str]
    """(reader, tensor) -> the reader's rank variable stepped by the tensor's recurrence."""
    bounds: dict[str, dict[str, int]]

    @classmethod
    def of(cls, workload: WorkloadInfo) -> FusionRules:
        """The rules of ``workload`` (from its resolved Einsums)."""
        reduces, reads, writes, bounds = {}, {}, {}, {}
        recurrences: dict[tuple[str, str], str] = {}
        for e in workload.einsums:
            reduces[e.name] = frozenset(e.reduced_variables)
            reads[e.name] = frozenset(e.inputs)
            writes[e.name] = frozenset(e.outputs)
            bounds[e.name] = dict(e.bounds)
        for e in workload.einsums:
            for t in e.inputs:
                for w in workload.tensors[t].writers:
                    if w == e.name:
                        continue
                    stepped = _stepped_rank(workload.einsum(w).projections[t])
                    proj = e.projections[t].get(stepped) if stepped else None
                    if proj is not None and len(proj.variables) == 1:
                        recurrences[(e.name, t)] = proj.variables[0]
        return cls(reduces, reads, writes, recurrences, bounds)

    def step(
        self,
        order: Sequence[str],
        j: int,
        state: State,
        loops: Sequence[tuple[str, int]],
        b_prev: int,
        b_next: int,
    ) -> State | None:
        """The state after Einsum ``order[j]`` with fused-prefix ``loops`` sharing its
        first ``b_prev`` loops with the previous Einsum and ``b_next`` with the next;
        None if that breaks a dependency."""
        name = order[j]
        reads, writes = self.reads[name], self.writes[name]
        later = set(order[j + 1 :])
        new: set[tuple[str, int, str]] = set()
        for kind, d, t in state:
            if kind == "partial":
                if t in reads and d <= b_prev:
                    return None  # reads a reduction not finished under the shared loop
                if d <= b_next and any(t in self.reads[n] for n in later):
                    new.add((kind, d, t))
            else:  # await: the tile-1 loop must reach the recurrence's writer
                if d > b_prev:
                    return None
                if t not in writes:
                    if d > b_next:
                        return None
                    new.add((kind, d, t))
        for d in range(1, b_next + 1):
            if loops[d - 1][0] in self.reduces[name]:
                for t in writes:
                    if any(t in self.reads[n] for n in later):
                        new.add(("partial", d, t))
        for t in sorted(reads - writes):
            var = self.recurrences.get((name, t))
            if var is None or not any(t in self.writes[n] for n in later):
                continue
            if self.bounds[name].get(var, 1) <= 1:
                continue
            depth = next((d for d in range(1, b_next + 1) if loops[d - 1] == (var, 1)), None)
            if depth is None:
                return None  # the recurrence's writer would run after all of v
            if any(v == var and isinstance(n, SpatialTile) for v, n in loops[:depth]):
                return None  # instances would run the steps of v side by side
            new.add(("await", depth, t))
        return frozenset(new)


def _stepped_rank(projection) -> str | None:
    """The rank a recurrence writes one step ahead (``RM[m1+1]``: M1), if any."""
    for rank, expr in projection.items():
        if len(expr.variables) == 1 and expr.const != 0:
            return rank
    return None
