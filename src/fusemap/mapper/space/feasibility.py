"""Cheap checks, before the search, that an Einsum has any mapping at all.

A search over millions of tile shapes that ends in "no valid mapping" tells a user
nothing and may take minutes. The constraints checked here are the ones no tile shape can
repair: no compute unit enabled, a memory that must keep a tensor (``keep``) but cannot
hold one value of it beside the others it must keep, a fanout dimension whose
``reuse``/``loop_bounds`` leave no spatial loop. Each names the constraint.
"""

from __future__ import annotations

import math

from ...spec.arch_eval import ArchEvaluator, FlatArch
from ...spec.errors import FusemapError
from ...spec.resolve import EinsumInfo, WorkloadInfo
from .spatial import min_usage_fallbacks
from .templates import compute_units


def check_einsum(
    info: EinsumInfo, workload: WorkloadInfo, arch: ArchEvaluator, spread_bound: int = 0
) -> list[str]:
    """Raise a :class:`FusemapError` naming what no mapping of ``info`` can meet; return
    the notes the mapper should print (``min_usage`` fallbacks; ``spread_bound``: the
    mapper's :attr:`~fusemap.mapper.space.config.MapperConfig.spread_bound`)."""
    units = compute_units(info, arch)
    if not units:
        raise FusemapError(
            f"Einsum {info.name}: no compute unit is enabled for it (every !Compute's "
            "'enabled' is false for this Einsum)"
        )
    reasons: list[str] = []
    notes: list[str] = []
    for unit in units:
        flat = arch.flat(info.name, unit)
        reason = _memory_floor(info, workload, flat)
        if reason is None:
            notes += min_usage_fallbacks(info, flat, spread_bound)
            return notes
        reasons.append(reason)
    raise FusemapError(f"Einsum {info.name}: no valid mapping: {'; '.join(reasons)}")


def _memory_floor(info: EinsumInfo, workload: WorkloadInfo, flat: FlatArch) -> str | None:
    """Why even one value of every tensor a memory must keep does not fit, or None."""
    for comp in flat.path:
        if comp.kind != "memory" or math.isinf(comp.size):
            continue
        kept = [t for t in info.tensors if t in comp.keep]  # a node in every template
        bits = sum(comp.value_bits(t, workload.tensors[t].bits_per_value) for t in kept)
        if bits > comp.size * (1 + 1e-9):
            names = ", ".join(kept)
            return (
                f"on the path to {flat.compute}, {comp.name} (size {comp.size:g} bits) must "
                f"keep {names}, and one value of each needs {bits:g} bits"
            )
    return None
