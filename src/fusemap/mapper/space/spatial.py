"""Spatial loops of a template: which rank variables each fanout dimension may spread,
over how many instances (``reuse``, ``loop_bounds``, ``min_usage``), and every
assignment of them to the fanouts on a path."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ...spec.arch_eval import FlatArch, SpatialInfo
from ...spec.errors import FusemapError
from ...spec.expressions import evaluate
from ...spec.resolve import EinsumInfo
from ...spec.sets import TensorSet, evaluate_set_expression
from .tiles import trip_counts


@dataclass(frozen=True)
class SpatialLoop:
    """A spatial loop of a template: ``var`` over ``trips`` instances of a fanout."""

    component: str
    dimension: str
    level: int
    var: str
    trips: int
    slot: int = -1  # chain position (holder index, or len(holders) = compute) it sits above


def spatial_choices(
    info: EinsumInfo, flat: FlatArch, spread_bound: int = 0
) -> list[tuple[SpatialLoop, ...]]:
    """Every assignment of spatial loops to the fanouts on the path. Several loops over
    one variable divide its bound together, unless it may be cut unevenly (then the
    tiler keeps the tile shapes that give every loop its trips)."""
    dims: list[list[tuple[SpatialLoop, ...]]] = []  # per fanout dimension, its choices
    for level, comp in enumerate(flat.path):
        for dim in comp.spatial:
            opts = _dim_assignments(info, dim, comp.name, spread_bound)
            dims.append(
                [tuple(SpatialLoop(comp.name, dim.name, level, v, n) for v, n in a) for a in opts]
            )
    out: list[tuple[SpatialLoop, ...]] = []
    for combo in itertools.product(*dims):
        loops = tuple(sum(combo, ()))
        per_var: dict[str, int] = {}
        for s in loops:
            per_var[s.var] = per_var.get(s.var, 1) * s.trips
        if all(
            info.bounds[v] % n == 0 or info.bounds[v] <= spread_bound for v, n in per_var.items()
        ):
            out.append(loops)
    return out


def _dim_assignments(
    info: EinsumInfo, dim: SpatialInfo, comp_name: str, spread_bound: int
) -> list[tuple[tuple[str, int], ...]]:
    """Spatial loops one fanout dimension may carry: (var, trips) tuples reaching its
    ``min_usage``, or, when none can, those of the highest usage any reaches (the
    format's fallback)."""
    options = _dim_options(info, dim, comp_name, spread_bound)
    need = min_usage_need(info, dim)
    if not any(used >= need for _, used in options):
        need = max((used for _, used in options), default=1)
    return [acc for acc, used in options if used >= need]


def _dim_options(
    info: EinsumInfo, dim: SpatialInfo, comp_name: str, spread_bound: int = 0
) -> list[tuple[tuple[tuple[str, int], ...], int]]:
    """Every set of spatial loops one fanout dimension may carry, with the instances it
    uses: ((var, trips), ...), within the fanout, obeying ``reuse`` and ``loop_bounds``.
    Trips divide their variable, or are any count up to it when its bound is at most
    ``spread_bound`` (an uneven spread)."""
    tensors = set(info.tensors)
    allowed = []
    for v in info.rank_variables:
        if info.bounds[v] < 2:
            continue
        if any(info.relevance(t, v) != "irrelevant" for t in dim.reuse & tensors):
            continue
        allowed.append(v)
    options: list[tuple[tuple[tuple[str, int], ...], int]] = []

    def rec(i: int, used: int, acc: tuple) -> None:
        if i == len(allowed):
            if _bounds_ok(info, dim, acc, comp_name):
                options.append((acc, used))
            return
        v = allowed[i]
        rec(i + 1, used, acc)
        for trips in trip_counts(info.bounds[v], spread_bound):
            if 2 <= trips <= dim.fanout // used:
                rec(i + 1, used * trips, acc + ((v, trips),))

    rec(0, 1, ())
    return options


def min_usage_need(info: EinsumInfo, dim: SpatialInfo) -> int:
    """Instances a dimension must use (``min_usage``; not applied to copy Einsums)."""
    if dim.min_usage <= 0 or info.is_copy:
        return 1
    return math.ceil(dim.min_usage * dim.fanout - 1e-9)


def min_usage_fallbacks(info: EinsumInfo, flat: FlatArch, spread_bound: int) -> list[str]:
    """One line per fanout dimension whose ``min_usage`` no spatial loop set reaches for
    ``info`` (the highest-usage mappings compete instead)."""
    out = []
    for comp in flat.path:
        for dim in comp.spatial:
            need = min_usage_need(info, dim)
            options = _dim_options(info, dim, comp.name, spread_bound)
            best = max((used for _, used in options), default=1)
            if best < need:
                out.append(
                    f"Einsum {info.name}: {comp.name}.{dim.name} can use at most {best} of "
                    f"its {dim.fanout} instances (min_usage {dim.min_usage:g} needs {need}); "
                    f"mappings using {best} competed"
                )
    return out


def _bounds_ok(info: EinsumInfo, dim: SpatialInfo, acc: tuple, comp_name: str) -> bool:
    """The dimension's ``loop_bounds`` constraints, on the trip counts of its loops."""
    if not dim.loop_bounds:
        return True
    trips = dict(acc)
    for lb in dim.loop_bounds:
        names = _var_set(info, lb.expression, comp_name)
        value = _bound_value(info, lb.value, comp_name)
        op = lb.operator.strip()
        if op.startswith("product"):
            vals = [math.prod(trips.get(v, 1) for v in names)]
            op = op[len("product") :]
        else:
            vals = [trips.get(v, 1) for v in names]
        for x in vals:
            if not _compare(x, op, value):
                return False
    return True


def _var_set(info: EinsumInfo, expr, comp_name: str) -> set[str]:
    names = frozenset(info.bounds)
    space = TensorSet(names, names, "rank_variable")
    try:
        found = evaluate_set_expression(expr, info.scope, kind="rank_variable", space=space)
        return set(found.items)
    except FusemapError as err:
        raise FusemapError(f"{comp_name}: loop_bounds expression {expr!r}: {err}") from None


def _bound_value(info: EinsumInfo, expr, comp_name: str) -> float:
    try:
        return float(evaluate(expr, info.scope))
    except (FusemapError, TypeError, ValueError) as err:
        raise FusemapError(f"{comp_name}: loop_bounds value {expr!r}: {err}") from None


def _compare(x: float, op: str, value: float) -> bool:
    ops = {
        "==": x == value,
        "<=": x <= value,
        ">=": x >= value,
        "<": x < value,
        ">": x > value,
        "!=": x != value,
    }
    if op not in ops:
        raise FusemapError(f"loop_bounds: unknown operator '{op}' (use ==, <=, >=, <, >, !=)")
    return ops[op]
