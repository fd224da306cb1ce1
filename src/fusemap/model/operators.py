"""Operator costs: which compute actions one point of an Einsum's iteration space costs.

A point of an Einsum applies its map operator, then (if the Einsum reduces some rank)
its reduce operator:

* a ``copy`` map (an Einsum of one input tensor) costs one ``copy`` operator when the
  Einsum reduces nothing and is absorbed by the reduce operator otherwise; ``none``
  reduces cost nothing; a copy Einsum (``is_copy_operation``) does no computes at all;
* a ``multiply`` map followed by an ``add`` reduce is one fused operator,
  ``multiply_add`` (a MAC);
* the reduce operator is charged only when the Einsum reduces a rank (a rank variable
  that indexes no output), so an elementwise ``add`` Einsum costs one ``add``.

An operator resolves to actions of the compute unit: its entry in the unit's
``operators:`` map (counts of actions or other operators, resolved recursively), else
the action of the same name, else one ``compute`` action. Plain specs (multiply map, add
reduce, an arch with a single ``compute`` action) therefore cost exactly one ``compute``
per point, and so does an Einsum that only re-reads one tensor (``Y[m] = X[m]``, as the
established model counts it); a unit makes such copies free with ``operators: {copy:
{}}``. A custom operator (not a built-in name) must be declared.
"""

from __future__ import annotations

from ..spec.arch_eval import ComponentInfo
from ..spec.errors import SpecError
from ..spec.resolve import EinsumInfo
from ..spec.workload import MAP_OPERATORS, REDUCE_OPERATORS

FUSED_MAC = "multiply_add"
"""A multiply map followed by an add reduce: one fused multiply-add."""

_BUILT_IN = frozenset(MAP_OPERATORS) | frozenset(REDUCE_OPERATORS) | {FUSED_MAC}


def point_operators(einsum: EinsumInfo) -> list[str]:
    """The operators applied at one point of ``einsum``'s iteration space."""
    if einsum.is_copy:
        return []
    reduce = einsum.reduce_operator if einsum.reduced_variables else "none"
    if einsum.map_operator == "multiply" and reduce == "add":
        return [FUSED_MAC]
    if einsum.map_operator == "copy":
        return ["copy"] if reduce == "none" else [reduce]
    return [einsum.map_operator] + ([] if reduce == "none" else [reduce])


def operator_actions(einsum: EinsumInfo, unit: ComponentInfo) -> dict[str, float]:
    """Action name -> number of actions of ``unit`` per point of ``einsum``."""
    out: dict[str, float] = {}
    for op in point_operators(einsum):
        for action, n in resolve_operator(unit, op).items():
            out[action] = out.get(action, 0.0) + n
    return out


def resolve_operator(unit: ComponentInfo, op: str, _seen: tuple[str, ...] = ()) -> dict[str, float]:
    """Actions of ``unit`` (with counts) that one ``op`` costs."""
    if op in _seen:
        raise SpecError(
            f"compute unit {unit.name}: operators refer to each other in a cycle: "
            + " -> ".join((*_seen, op)),
            unit.location,
        )
    parts = unit.operators.get(op)
    if parts is None:
        if op in unit.actions:
            return {op: 1.0}
        if op not in _BUILT_IN:
            raise SpecError(
                f"compute unit {unit.name} has no cost for the custom operator '{op}': declare "
                f"it under 'operators:' or as an action",
                unit.location,
            )
        return {"compute": 1.0}
    out: dict[str, float] = {}
    for name, n in parts.items():
        if name in unit.actions and (name == op or name not in unit.operators):
            inner = {name: 1.0}
        else:
            inner = resolve_operator(unit, name, (*_seen, op))
        for action, m in inner.items():
            out[action] = out.get(action, 0.0) + n * m
    return out
