"""What one storage node, or the compute leaf, adds to the criteria of tile-shape rows:
energy and per-instance latency counts, from the node's count terms
(:mod:`fusemap.mapper.tiling.terms`). A part of :class:`~fusemap.mapper.tiling.tiler.TemplateTiler`."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property

import numpy as np

from ...model.operators import operator_actions
from ...spec.arch_eval import ComponentInfo
from .latency import finish_objectives
from .result import TemplateResult
from .terms import NodeTerms, Term, fill_basis, first_basis


class NodeCosts:
    """Node and leaf costs of a template (mixed into the tiler, whose attributes they use:
    ``info``, ``t``, ``nodes``, ``comp``, ``bits``, ``scale``, ``vars``, ``layout``,
    ``width`` and ``memo``)."""

    def _node_costs(
        self,
        node: NodeTerms,
        sizes: dict[str, np.ndarray],
        crit: np.ndarray,
        lookup: Callable[[str, str], np.ndarray] | None = None,
    ):
        """Add a node's energy and latency counts to ``crit``. ``lookup(kind, tensor)``,
        when given, looks the fill or first basis of the rows up instead."""
        bases = {}
        for term in node.terms:
            if term.basis not in bases:
                if lookup is not None:
                    bases[term.basis] = lookup(term.basis, term.tensor)
                else:
                    f = fill_basis if term.basis == "fill" else first_basis
                    bases[term.basis] = f(self.info, term.tensor, sizes)
            comp = self.comp[term.component]
            if term.action not in comp.actions:
                continue
            vpa = comp.values_per_action(term.action, term.tensor, self.bits[term.tensor])
            basis = bases[term.basis]
            if term.total:
                crit[:, 0] += basis * self.energy_per_value(term)
            if term.per_instance:
                col, weight = self._latency_column(comp, term.action)
                if col is not None:
                    crit[:, col] += basis * (term.per_instance / vpa * weight)

    def energy_per_value(self, term: Term) -> float:
        """Energy of one value of ``term``'s basis (0 if its component has no such
        action)."""
        comp = self.comp[term.component]
        if not term.total or term.action not in comp.actions:
            return 0.0
        vpa = comp.values_per_action(term.action, term.tensor, self.bits[term.tensor])
        epa = comp.actions[term.action].energy_per_action(comp.name)
        return term.total / vpa * comp.actions_scale * self.scale * epa

    def _latency_column(self, comp: ComponentInfo, action: str) -> tuple[int | None, float]:
        """Column and weight of per-instance calls: one column per component when its
        latency is the default sum of calls / throughput, else one per action."""
        throughput = comp.actions[action].throughput
        if comp.node.total_latency is None:
            if math.isinf(throughput):
                return None, 0.0
            return self.layout.add("lat:" + comp.name), 1.0 / throughput
        return self.layout.add(f"calls:{comp.name}:{action}"), 1.0

    def leaf_costs(self) -> np.ndarray:
        """Criteria of the compute leaf (tile shape 1 everywhere): a constant per template,
        and the same for every template whose leaf has the same count terms."""
        n = len(self.t.holders)
        key = (
            "leaf",
            self.t.compute,
            self.scale,
            tuple(self.layout.names),
            tuple(
                (u.component, u.action, u.tensor, u.basis, u.total, u.per_instance)
                for node in self.nodes
                if node.position == n
                for u in node.terms
            ),
        )
        if key not in self.memo:
            self.memo[key] = self._leaf_costs()
        return self.memo[key].copy()

    def _leaf_costs(self) -> np.ndarray:
        crit = np.zeros((1, self.width))
        ones = {v: np.ones(1, dtype=np.int64) for v in self.vars}
        for node in self.nodes:
            if node.position == len(self.t.holders) and self.uneven is None:
                self._node_costs(node, ones, crit)  # else per row (TemplateTiler._leaf_rows)
        comp = self.comp[self.t.compute]
        if not self.info.is_copy:
            ops = float(self.info.operations)
            for action, n in operator_actions(self.info, comp).items():
                epa = comp.actions[action].energy_per_action(comp.name)
                crit[:, 0] += ops * n * comp.actions_scale * self.scale * epa
        return crit

    def latency_of(self, result: TemplateResult, rows: np.ndarray) -> np.ndarray:
        """Latency of some of ``result``'s rows, from their latency counts."""
        crit = np.zeros((len(rows), self.width))
        for name, values in result.latency_counts.items():
            crit[:, self.layout.names.index(name)] = values[rows]
        return finish_objectives(self, crit)[1]

    @cached_property
    def leaf_energy(self) -> float:
        """Energy of the compute leaf (a constant of the template)."""
        return float(self.leaf_costs()[0, 0])
