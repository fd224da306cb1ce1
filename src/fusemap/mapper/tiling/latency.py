"""Energy and latency of complete tile shapes: the model's latency rule on the
criteria columns of a :class:`~fusemap.mapper.tiling.tiler.TemplateTiler`."""

from __future__ import annotations

import numpy as np

from ...model.costs import component_latency
from ...model.operators import operator_actions
from ...spec.arch_eval import ComponentInfo
from .result import TemplateResult
from .stage import Stage

OPS_COLUMN = "calls:@operations"
"""Criteria column of a template with uneven spatial loops: compute operations of its
busiest instance (otherwise a constant of the template)."""


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
        actions = operator_actions(self.info, comp) if comp.name == self.t.compute else {}
        if actions and OPS_COLUMN in names:  # operations per instance per row (uneven)
            ops = crit[:, [names.index(OPS_COLUMN)]]
            return _latency_per_calls(self, comp, ops * np.array([list(actions.values())]),
                                      list(actions))  # fmt: skip
        calls = {a: 0.0 for a in comp.actions}
        ops = _ops_per_instance(self)
        for action, n in actions.items():
            calls[action] = ops * n
        return np.full(rows, component_latency(comp, calls) * self.scale)
    if comp.node.total_latency is None:
        col = "lat:" + comp.name
        if col in names:
            return crit[:, names.index(col)] * comp.actions_scale * self.scale
        return np.zeros(rows)
    cols = [
        (a, names.index(f"calls:{comp.name}:{a}"))
        for a in comp.actions
        if f"calls:{comp.name}:{a}" in names
    ]
    return _latency_per_calls(self, comp, crit[:, [c for _, c in cols]], [a for a, _ in cols])


def _latency_per_calls(
    self, comp: ComponentInfo, calls: np.ndarray, actions: list[str]
) -> np.ndarray:
    """The component's latency expression per row of ``calls`` (rows, actions), once per
    distinct row (cached for the Einsum's tilers)."""
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


def _ops_per_instance(self) -> float:
    if self.info.is_copy:
        return 0.0
    ops = 1.0
    for v in self.vars:
        ops *= self.info.bounds[v]
    for s in self.t.spatial:
        ops /= s.trips
    return ops


def finish_template(tiler, stages: list[Stage]) -> TemplateResult:
    """A template's complete tile shapes (the last stage plus the compute leaf), with
    their energy and latency, and the trail to rebuild each one."""
    last = stages[-1]
    crit = last.crit + tiler.leaf_costs()
    if tiler.want_latency:
        energy, latency = finish_objectives(tiler, crit)
    else:  # energy alone prunes: latency only of the kept rows (see latency_of)
        energy, latency = crit[:, 0].copy(), np.full(len(crit), np.nan)
    reservations = {c: tiler._memory_total(crit, c) for c in tiler.res_cols}
    buckets = {
        c: np.concatenate([crit[:, cols], crit[:, [tiler.res_cols[c]]]], axis=1)
        for c, cols in tiler.depth_cols.items()
        if c in tiler.res_cols
    }
    relevance = {x: {v: tiler.info.relevance(x, v) for v in tiler.vars} for x in tiler.info.tensors}
    return TemplateResult(
        tiler.t,
        energy,
        latency,
        reservations,
        [tiler.bounds[None, :].copy()] + [st.sizes for st in stages],
        [st.mids for st in stages],
        [st.parents for st in stages],
        tiler.vars,
        relevance,
        {
            name: crit[:, k]
            for k, name in enumerate(tiler.layout.names)
            if name.startswith(("lat:", "calls:"))
        },
        last.seq if tiler.fusion else None,
        buckets,
    )
