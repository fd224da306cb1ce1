"""Energy and latency of complete tile shapes: the model's latency rule on the
criteria columns of a :class:`~fusemap.mapper.tiling.TemplateTiler`."""

from __future__ import annotations

import numpy as np

from ..model.costs import component_latency
from ..model.operators import operator_actions
from ..spec.arch_eval import ComponentInfo


def finish_objectives(self, crit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Energy and latency of complete tile shapes (the model's latency rule)."""
    rows = len(crit)
    per_comp = []
    for comp in self.flat.path:
        if comp.kind == "container":
            continue
        per_comp.append(_component_latency(self, comp, crit, rows))
    latency = np.maximum.reduce(per_comp) if per_comp else np.zeros(rows)
    energy = crit[:, 0] + self.leak * latency
    return energy, latency


def _component_latency(self, comp: ComponentInfo, crit: np.ndarray, rows: int) -> np.ndarray:
    names = self.layout.names
    if comp.kind == "compute":
        calls = {a: 0.0 for a in comp.actions}
        if comp.name == self.t.compute:
            ops = _ops_per_instance(self)
            for action, n in operator_actions(self.info, comp).items():
                calls[action] = ops * n
        return np.full(rows, component_latency(comp, calls) * self.scale)
    if comp.node.total_latency is None:
        col = "lat:" + comp.name
        if col in names:
            return crit[:, names.index(col)] * comp.actions_scale * self.scale
        return np.zeros(rows)
    cols = {
        a: names.index(f"calls:{comp.name}:{a}")
        for a in comp.actions
        if f"calls:{comp.name}:{a}" in names
    }
    out = np.empty(rows)
    cache: dict[tuple, float] = {}
    for r in range(rows):
        calls = {a: 0.0 for a in comp.actions}
        for a, col in cols.items():
            calls[a] = float(crit[r, col])
        key = tuple(calls.values())
        if key not in cache:
            cache[key] = component_latency(comp, calls) * self.scale
        out[r] = cache[key]
    return out


def _ops_per_instance(self) -> float:
    if self.info.is_copy:
        return 0.0
    ops = 1.0
    for v in self.vars:
        ops *= self.info.bounds[v]
    for s in self.t.spatial:
        ops /= s.trips
    return ops
