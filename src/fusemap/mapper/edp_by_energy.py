"""The EDP optimum through the energy optimum, where a latency floor proves it.

Every mapping of the workload costs at least the least energy ``E*`` (the energy
optimum, exact over the whole space), and takes at least the sum over Einsums of a
latency floor: an Einsum's latency is the maximum over its components, its compute unit
among them, and the compute unit is busy at least for the Einsum's operations spread
over all of its instances (:func:`compute_floor`; the busiest instance does at least the
average); and every Einsum takes at least the least latency of its own pmappings over
the whole fused space (:func:`least_latency`: its table and the floors of its templates
with several fused loops per rank variable). The mapper's mappings add their Einsums'
latencies. So every mapping's EDP is at least ``E* * sum(floors)``, and if the energy
optimum takes no more than that sum, it is an EDP optimum: no EDP tables are needed
(:func:`proves_edp`). Otherwise the EDP search runs as before.

The compute floors cost nothing; the least latency of an Einsum over its whole space
needs its table made with the latency columns, so it is asked only for the Einsums the
energy optimum keeps above their compute floor (a copy; attention Einsums bound by a
buffer's ports), smallest first, and not after one that is above its least. An Einsum
with operations but no compute floor (a ``total_latency`` expression on its compute
unit, read as none) means nothing is tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..model.costs import component_latency, fanout_copies
from ..model.operators import operator_actions
from ..spec.arch_eval import ArchEvaluator
from ..spec.resolve import EinsumInfo, WorkloadInfo
from .pmappings.generate import generate_pmappings
from .space.config import MapperConfig
from .space.templates import compute_units

TOLERANCE = 1e-9
"""Relative slack of the proof (float sums over Einsums; the join's ``GAIN``)."""


def compute_floor(info: EinsumInfo, arch: ArchEvaluator, scale: float) -> float:
    """Least latency of the Einsum's compute unit over every mapping: its operations
    spread evenly over all instances of the fastest unit it may run on (0 for an Einsum
    without operations, or a unit whose latency is an expression)."""
    if info.is_copy:
        return 0.0
    points = math.prod(info.bounds[v] for v in info.rank_variables)
    least = math.inf
    for unit in compute_units(info, arch):
        flat = arch.flat(info.name, unit)
        level = len(flat.path) - 1
        comp = flat.path[level]
        if comp.node.total_latency is not None:
            return 0.0
        each = points / fanout_copies(flat, level)
        calls = dict.fromkeys(comp.actions, 0.0)
        for action, n in operator_actions(info, comp).items():
            calls[action] += each * n
        least = min(least, component_latency(comp, calls) * scale)
    return least if math.isfinite(least) else 0.0


def least_latency(spec, info: EinsumInfo, wl: WorkloadInfo, arch, config: MapperConfig) -> float:
    """The least latency of the Einsum's pmappings over the whole fused space: its table
    (every template, pruned on latency) and the floors of its templates with several
    fused loops per rank variable (exact: no ceiling)."""
    table = generate_pmappings(
        spec, info.name, objective="latency", config=config, workload=wl, arch=arch,
        full_floors=True,
    )  # fmt: skip
    found = [float(table.latency.min())] if len(table) else []
    return min([*found, *table.full_floors_latency.values()], default=0.0)


def compute_floors(wl: WorkloadInfo, arch: ArchEvaluator) -> dict[str, float] | None:
    """Per Einsum, :func:`compute_floor`; None if an Einsum with operations has none (no
    proof is tried then: every Einsum would need its table)."""
    out = {e.name: compute_floor(e, arch, wl.n_instances * e.n_instances) for e in wl.einsums}
    if any(out[e.name] <= 0 for e in wl.einsums if not e.is_copy):
        return None
    return out


def proves_edp(
    latencies: dict[str, float],
    floors: dict[str, float],
    least: Callable[[str], float],
    order: list[str],
) -> bool:
    """Whether the energy optimum, whose Einsums take ``latencies``, is an EDP optimum:
    each Einsum at its compute floor or else at its ``least`` latency over the whole
    space (asked only where needed, in ``order``, until one is not), within
    :data:`TOLERANCE`."""
    for name in order:
        have = latencies[name] / (1 + TOLERANCE)
        if have > floors[name] and have > least(name):
            return False
    return True
