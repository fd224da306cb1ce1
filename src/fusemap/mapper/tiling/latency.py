"""Energy and latency of complete tile shapes: the model's latency rule on the criteria
columns of one template (:class:`~fusemap.mapper.tiling.columns.ColumnLayout`)."""

from __future__ import annotations

import numpy as np

from ...model.costs import component_latency, gated_fraction, total_leak_power
from ...model.operators import operator_actions
from ...spec.arch_eval import ComponentInfo, FlatArch
from ...spec.resolve import EinsumInfo
from ..space.templates import Template
from .columns import OPERATIONS, Column, ColumnLayout, Kind
from .result import TemplateResult
from .terms import memoized


class TemplateLatency:
    """The latency of a template's complete rows, and their energy with leakage over it.

    ``leak``: leakage power of the components on the path (gated by what the template's
    spatial loops use); ``memo`` is shared by the tilers of one Einsum."""

    def __init__(
        self,
        template: Template,
        info: EinsumInfo,
        flat: FlatArch,
        layout: ColumnLayout,
        leak: float,
        scale: float,
        memo: dict,
    ) -> None:
        self.template, self.info, self.flat, self.layout = template, info, flat, layout
        self.leak, self.scale, self.memo = leak, scale, memo

    def objectives(self, crit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Energy and latency of complete tile shapes (the model's latency rule)."""
        rows = len(crit)
        per_comp = []
        for comp in self.flat.path:
            if comp.kind == "container":
                continue
            per_comp.append(self._component(comp, crit, rows))
        latency = np.maximum.reduce(per_comp) if per_comp else np.zeros(rows)
        energy = crit[:, 0] + self.leak * latency
        return energy, latency

    def of_rows(self, result: TemplateResult, rows: np.ndarray) -> np.ndarray:
        """Latency of some of ``result``'s rows, from their latency counts."""
        crit = np.zeros((len(rows), len(self.layout)))
        for column, values in result.latency_counts.items():
            crit[:, self.layout.of(column)] = values[rows]
        return self.objectives(crit)[1]

    def _component(self, comp: ComponentInfo, crit: np.ndarray, rows: int) -> np.ndarray:
        layout = self.layout
        if comp.kind == "compute":
            if comp.name == self.template.compute:
                actions = operator_actions(self.info, comp)
            else:
                actions = {}
            if actions and OPERATIONS in layout:  # operations per instance per row (uneven)
                ops = crit[:, [layout.of(OPERATIONS)]]
                counts = ops * np.array([list(actions.values())])
                return self._per_calls(comp, counts, list(actions))
            calls = {a: 0.0 for a in comp.actions}
            ops_each = self._operations_per_instance()
            for action, n in actions.items():
                calls[action] = ops_each * n
            return np.full(rows, component_latency(comp, calls) * self.scale)
        if comp.node.total_latency is None:
            col = Column(Kind.LATENCY, comp.name)
            if col in layout:
                return crit[:, layout.of(col)] * comp.actions_scale * self.scale
            return np.zeros(rows)
        cols = [
            (a, layout.of(Column(Kind.CALLS, comp.name, a)))
            for a in comp.actions
            if Column(Kind.CALLS, comp.name, a) in layout
        ]
        return self._per_calls(comp, crit[:, [c for _, c in cols]], [a for a, _ in cols])

    def _per_calls(self, comp: ComponentInfo, calls: np.ndarray, actions: list[str]) -> np.ndarray:
        """The component's latency expression per row of ``calls`` (rows, actions), once
        per distinct row (cached for the Einsum's tilers)."""
        uniq, inverse = np.unique(calls, axis=0, return_inverse=True)
        cache = self.memo.setdefault(("latency", comp.name, tuple(actions)), {})
        values = np.empty(len(uniq))
        for i, row in enumerate(uniq.tolist()):
            key = tuple(row)
            if key not in cache:
                given = {a: 0.0 for a in comp.actions}
                given.update(zip(actions, row, strict=True))
                cache[key] = component_latency(comp, given)
            values[i] = cache[key] * self.scale
        return values[inverse.ravel()]

    def _operations_per_instance(self) -> float:
        if self.info.is_copy:
            return 0.0
        ops = 1.0
        for v in self.info.rank_variables:
            ops *= self.info.bounds[v]
        for s in self.template.spatial:
            ops /= s.trips
        return ops


def template_leak(flat: FlatArch, template: Template, memo: dict) -> float:
    """Leakage power on the path, each component gated by what the spatial loops use."""
    used: dict[tuple[str, str], int] = {}
    for s in template.spatial:
        key = (s.component, s.dimension)
        used[key] = used.get(key, 1) * s.trips
    return memoized(
        memo,
        ("leak", template.compute, tuple(sorted(used.items()))),
        lambda: sum(
            total_leak_power(flat, lv) * gated_fraction(flat, lv, used)
            for lv in range(len(flat.path))
        ),
    )
