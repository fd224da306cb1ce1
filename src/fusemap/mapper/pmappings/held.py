"""What other Einsums may hold while an Einsum runs fusing nothing: the amounts its
templates that fuse nothing are searched beside (FFM's pruning, with the hosted amount
as a known reservation)."""

from __future__ import annotations

from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..space.config import MapperConfig
from ..space.templates import backing_levels, compute_units, top_level

MAX_HELD_AMOUNTS = 64
"""Above this many amounts an Einsum may host, its templates that fuse nothing keep their
reservations as criteria instead of being searched once per amount."""


def held_amounts(
    info, workload: WorkloadInfo, arch: ArchEvaluator, config: MapperConfig, joined
) -> list[dict[str, float]] | None:
    """Every amount (bits per memory) of other Einsums' tensors that may be held while
    ``info`` runs fusing nothing, nothing first; None when there are too many.

    Such an Einsum shares no loop with its neighbours, so all that can be held beside it
    are tensors fused whole (no loop above their backing node) between two of their
    users with it in between: any subset of them, each in any memory that may back it.
    For each amount the least energy under the capacity left is what the join needs
    (FFM's pruning, with the hosted amount as a known reservation)."""
    if not config.fusion or config.hosts is None:
        return None
    if info.name not in config.hosts:
        return [{}]
    hosted = sorted(t for t in config.hosted.get(info.name, ()) if t not in info.tensors)
    options: list[dict[str, float]] = [{}]
    for t in hosted:
        user = next(e for e in workload.einsums if t in e.tensors)
        places = []
        for unit in compute_units(user, arch):
            flat = arch.flat(user.name, unit)
            top = top_level(flat)
            for level in backing_levels(user, flat, arch, t):
                if level == top:
                    continue  # not fused (the top memory may be unable to keep it)
                comp = flat.path[level]
                if comp.name in joined:
                    bits = workload.tensors[t].size * comp.value_bits(
                        t, workload.tensors[t].bits_per_value
                    )
                    places.append((comp.name, bits, comp.size))
        grown = []
        for opt in options:
            for memory, bits, size in dict.fromkeys(places):
                new = dict(opt)
                new[memory] = new.get(memory, 0.0) + bits
                if new[memory] <= size * (1 + 1e-9):  # else it cannot be held there
                    grown.append(new)
        options += grown
        unique = {tuple(sorted(o.items())): o for o in options}
        options = list(unique.values())
        if len(options) > MAX_HELD_AMOUNTS:
            return None
    return options
