"""The bound of a capped join: the partial mappings and pmappings that cannot be part
of a mapping within a known objective value (the *clean* pass, FFM §6.3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...spec.resolve import WorkloadInfo
from ..pmappings.table import PmappingTable
from .completion import Completion, Key, relaxed
from .rows import Group


@dataclass
class Bound:
    """The cut of a bounded join: a partial mapping whose objective, completed with the
    least every later Einsum can add, is worse than ``best`` cannot reach a mapping of
    objective at most ``best``; nor can a pmapping whose objective, completed with the
    least the other Einsums can add around it, is worse. Exact for every mapping within
    ``best``: objectives only add up along the order, and a row that dominates another
    (no worse in energy and latency) is never cut when the other is kept.

    The least added is each Einsum's best row alone, or, with ``completion``, the relaxed
    join's least from the live compatibility reached (:mod:`.completion`): tighter on long
    chains, where the best rows of neighbours disagree on the tensor between them."""

    objective: str  # energy | latency | edp
    best: float
    least_energy: np.ndarray  # [j]: least energy of the j-th Einsum of the order
    least_latency: np.ndarray
    floor: float = 0.0  # a lower bound of the objective known besides
    completion: Completion | None = None

    @classmethod
    def of(cls, objective, best, order, tables, workload: WorkloadInfo | None = None) -> Bound:
        """The bound for ``order``, knowing (or trying) an objective value ``best``
        (with the ``workload``, completed by the relaxed join)."""
        e = np.array([float(tables[n].energy.min()) for n in order])
        lat = np.array([float(tables[n].latency.min()) for n in order])
        bound = cls(objective, best, e, lat)
        if workload is not None:
            # The rows the plain bound allows are all a mapping within ``best`` may use.
            rows = None
            if math.isfinite(best):
                rows = [bound.allowed(tables[n], j) for j, n in enumerate(order)]
            bound.completion = relaxed(order, tables, workload, rows)
        if objective == "edp":  # some row of each Einsum is in the mapping
            bound.floor = max(
                float(bound.objective_of(*bound.completed(tables[n], j)).min())
                for j, n in enumerate(order)
            )
        return bound

    def objective_of(self, energy, latency):
        """The objective of mappings of this ``energy`` and ``latency``."""
        if self.objective == "energy":
            return energy
        return latency if self.objective == "latency" else energy * latency

    def lowest(self) -> float:
        """A lower bound of the objective: the least of every Einsum together."""
        if self.completion is not None:
            together = float(self.objective_of(*self.completion.lowest))
        else:
            together = float(self.objective_of(self.least_energy.sum(), self.least_latency.sum()))
        return max(together, self.floor)

    def completed(self, table, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row of the ``j``-th Einsum's table with the least of the others."""
        if self.completion is not None:
            around = self.completion.around[j]
            return table.energy + around[:, 0], table.latency + around[:, 1]
        rest_energy, rest_latency = self.rest_around(j)
        return table.energy + rest_energy, table.latency + rest_latency

    def rest_around(self, j: int) -> tuple[float, float]:
        """The least energy and latency of every Einsum of the order but the ``j``-th."""
        return (
            float(self.least_energy.sum() - self.least_energy[j]),
            float(self.least_latency.sum() - self.least_latency[j]),
        )

    def _within(self, value) -> np.ndarray:
        return value <= self.best * (1 + 1e-9)

    def keep(self, g: Group, j: int, key: Key) -> Group | None:
        """The rows of ``g`` (after Einsum ``j``, live compatibility ``key``) that may
        still reach ``best``."""
        if self.completion is not None:
            rest_energy, rest_latency = self.completion.rest(j + 1, key)
        else:
            rest_energy = self.least_energy[j + 1 :].sum()
            rest_latency = self.least_latency[j + 1 :].sum()
        keep = self._within(self.objective_of(g.energy + rest_energy, g.latency + rest_latency))
        if keep.all():
            return g
        return g.take(keep) if keep.any() else None

    def energy_allowance(self, j: int) -> float:
        """Energy objective: the most a pmapping of the ``j``-th Einsum may cost in a
        mapping within ``best`` (the others at their least alone)."""
        return self.best * (1 + 1e-9) - self.rest_around(j)[0]

    def allowed(self, table: PmappingTable, j: int) -> np.ndarray:
        """The rows of the ``j``-th Einsum's table that may be part of a mapping within
        ``best``."""
        return self._within(self.objective_of(*self.completed(table, j)))
