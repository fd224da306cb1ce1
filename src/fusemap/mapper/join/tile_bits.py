"""Bits the join reserves for fused tiles beyond a pmapping's own: a fused tensor's
tile at its backing node, the held tiles an Einsum between their users reserves again,
and a piece's shareable copies."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model.reuse import projection_terms
from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..pmappings.table import PmappingTable
from ..space.prefix import Compatibility
from ..tiling.terms import box_array


def backing_bits(info, tensor: str, c: Compatibility, table: PmappingTable, arch, workload):
    """Bits of a fused tensor's tile at its backing node (under its shared loops)."""
    sizes = {v: np.array([info.bounds[v]]) for v in info.rank_variables}
    for var, tile in c.loops:
        sizes[var] = np.array([tile])
    values = float(box_array(projection_terms(info, tensor), sizes)[0])
    res = table.results[0].template
    comp = arch.flat(info.name, res.compute).component(c.backing)
    return values * comp.value_bits(tensor, workload.tensors[tensor].bits_per_value)


@dataclass
class HostedTiles:
    """Fused tensors of other Einsums held while an Einsum runs (it lies between their
    users): each is reserved again, at the level under its loops, by every Einsum of its
    live range that does not share that level with the one before."""

    tables: dict[str, PmappingTable]
    workload: WorkloadInfo
    arch: ArchEvaluator
    accessors: dict[str, list[int]]
    order: list[str]
    memories: dict[str, float]
    bits: dict[Compatibility, float] = field(default_factory=dict)

    def adds(self, held: list[Compatibility], b_prev: int) -> list[tuple[str, int, float]]:
        """(memory, level, bits) of the ``held`` tiles this Einsum reserves again."""
        out = []
        for c in held:
            if c.backing not in self.memories or b_prev >= c.depth + 1:
                continue
            if c not in self.bits:
                user = self.order[self.accessors[c.tensor][0]]
                info = self.workload.einsum(user)
                self.bits[c] = backing_bits(
                    info, c.tensor, c, self.tables[user], self.arch, self.workload
                )
            out.append((c.backing, c.depth + 1, self.bits[c]))
        return out


@dataclass
class CopyBits:
    """The reservation of a piece's copy of a tensor under its first ``depth`` loops (0 in
    a memory whose usage is not tracked), cached per Einsum and tile."""

    cache: dict[tuple, float]
    table: PmappingTable
    loops: tuple[tuple[str, int], ...]
    workload: WorkloadInfo
    arch: ArchEvaluator
    memories: dict[str, float]

    def __call__(self, tensor: str, memory: str, depth: int) -> float:
        if memory not in self.memories:
            return 0.0
        c = Compatibility(tensor, memory, self.loops[:depth])
        key = (self.table.einsum, c)
        if key not in self.cache:
            info = self.workload.einsum(self.table.einsum)
            self.cache[key] = backing_bits(info, tensor, c, self.table, self.arch, self.workload)
        return self.cache[key]


def no_copy_bits(tensor: str, memory: str, depth: int) -> float:
    """A piece without shareable copies is never asked for their bits."""
    raise AssertionError("no copies")
