"""What one storage node, or the compute leaf, adds to the criteria of tile-shape rows:
energy and per-instance latency counts, from the node's count terms
(:mod:`fusemap.mapper.tiling.terms`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import numpy as np

from ...model.operators import operator_actions
from ...spec.arch_eval import ComponentInfo
from ...spec.resolve import EinsumInfo
from ..space.templates import Template
from .columns import ColumnLayout, latency_column, latency_weight
from .terms import NodeTerms, Term, fill_basis, first_basis

Sizes = dict[str, np.ndarray]


class NodeCosts:
    """Node and leaf costs of one template, in the columns of its ``layout``.

    ``nodes``: the template's count terms per node (empty when its counts are per row,
    uneven spreads: :mod:`fusemap.mapper.tiling.uneven` adds those with
    :meth:`add_per_row`). ``memo`` is shared by the tilers of one Einsum."""

    def __init__(
        self,
        template: Template,
        info: EinsumInfo,
        comp: dict[str, ComponentInfo],
        bits: dict[str, float],
        scale: float,
        layout: ColumnLayout,
        nodes: list[NodeTerms],
        memo: dict,
    ) -> None:
        self.template, self.info, self.comp, self.bits = template, info, comp, bits
        self.scale, self.layout, self.nodes, self.memo = scale, layout, nodes, memo

    def add_node(
        self,
        node: NodeTerms,
        sizes: Sizes,
        crit: np.ndarray,
        lookup: Callable[[str, str], np.ndarray] | None = None,
    ) -> None:
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
                col = latency_column(comp, term.action)
                if col is not None:
                    weight = latency_weight(comp, term.action)
                    crit[:, self.layout.of(col)] += basis * (term.per_instance / vpa * weight)

    def add_nodes_at(self, position: int, sizes: Sizes, crit: np.ndarray) -> None:
        """Add the costs of every node at chain ``position`` (tiles ``sizes`` there)."""
        for node in self.nodes:
            if node.position == position:
                self.add_node(node, sizes, crit)

    def add_per_row(
        self, name: str, action: str, tensor: str, total, per_instance, crit: np.ndarray
    ) -> None:
        """Add per-row counts of ``tensor``'s ``action`` at component ``name``: ``total``
        values in all, ``per_instance`` values per instance (latency)."""
        comp = self.comp[name]
        if action not in comp.actions:
            return
        crit[:, 0] += total * self.value_energy(name, action, tensor)
        col = latency_column(comp, action)
        if col is not None:
            vpa = comp.values_per_action(action, tensor, self.bits[tensor])
            crit[:, self.layout.of(col)] += per_instance * (latency_weight(comp, action) / vpa)

    def value_energy(self, name: str, action: str, tensor: str) -> float:
        """Energy of one value of ``tensor``'s ``action`` at component ``name``, as
        :meth:`add_per_row` counts it (0 if the component has no such action)."""
        comp = self.comp[name]
        if action not in comp.actions:
            return 0.0
        vpa = comp.values_per_action(action, tensor, self.bits[tensor])
        epa = comp.actions[action].energy_per_action(comp.name)
        return comp.actions_scale * self.scale * epa / vpa

    def energy_per_value(self, term: Term) -> float:
        """Energy of one value of ``term``'s basis (0 if its component has no such
        action)."""
        comp = self.comp[term.component]
        if not term.total or term.action not in comp.actions:
            return 0.0
        vpa = comp.values_per_action(term.action, term.tensor, self.bits[term.tensor])
        epa = comp.actions[term.action].energy_per_action(comp.name)
        return term.total / vpa * comp.actions_scale * self.scale * epa

    def leaf_costs(self) -> np.ndarray:
        """Criteria of the compute leaf (tile shape 1 everywhere): a constant per template,
        and the same for every template whose leaf has the same count terms."""
        n = len(self.template.holders)
        key = (
            "leaf",
            self.template.compute,
            self.scale,
            self.layout.columns,
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
        crit = np.zeros((1, len(self.layout)))
        ones = {v: np.ones(1, dtype=np.int64) for v in self.info.rank_variables}
        self.add_nodes_at(len(self.template.holders), ones, crit)
        comp = self.comp[self.template.compute]
        if not self.info.is_copy:
            ops = float(self.info.operations)
            for action, n in operator_actions(self.info, comp).items():
                epa = comp.actions[action].energy_per_action(comp.name)
                crit[:, 0] += ops * n * comp.actions_scale * self.scale * epa
        return crit

    @cached_property
    def leaf_energy(self) -> float:
        """Energy of the compute leaf (a constant of the template)."""
        return float(self.leaf_costs()[0, 0])
