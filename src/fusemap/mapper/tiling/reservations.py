"""What a template's rows reserve in each memory, in which columns, and whether it fits.

A memory is tracked only where it could overflow: if every tensor the template keeps
there fits whole, its reservations never rule anything out (unless the join shares the
memory: another Einsum's reservations may then be live beside them). With fusion, a
memory the join shares has three kinds of columns: private reservations below the
deepest fused node (its reservation column), private ones above it (one column per loop
depth: their lifetime depends on how deep the neighbours share loops) and fused backing
nodes (one shared column: the join counts them once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...model.reuse import projection_terms
from ...spec.arch_eval import ComponentInfo
from ...spec.resolve import EinsumInfo
from ..space.templates import Holder, Template
from .columns import ColumnLayout, Kind
from .gap_orders import GapContext
from .terms import box_array, memoized, reservation_sizes

Sizes = dict[str, np.ndarray]
FIT = 1 + 1e-9
"""Relative slack of every capacity check (sums of bits in floating point)."""


@dataclass(frozen=True)
class Reservations:
    """The reservation columns of one template and the capacities they are checked on."""

    info: EinsumInfo
    terms: dict[str, list[list[tuple[str, int]]]]  # per tensor, its projection terms
    comp: dict[str, ComponentInfo]
    bits: dict[str, float]
    capacity: dict[str, float]
    """What this template may fill of each memory: its size, less what it hosts."""
    columns: dict[str, int]
    """Tracked memory -> its reservation column (only memories that may overflow or that
    the join shares)."""
    at_depth: dict[str, np.ndarray]
    """Memory the join shares -> its per-depth columns (fusion only)."""
    shared: dict[str, int]
    """Memory the join shares -> the column of its fused backing nodes (fusion only)."""
    fused_pos: tuple[int, ...]
    p_max: int
    depths: int

    def holder_bits(self, holder: Holder, sizes: Sizes) -> np.ndarray:
        """Bits ``holder`` keeps with tiles ``sizes``, per row."""
        comp = self.comp[holder.component]
        return box_array(self.terms[holder.tensor], sizes) * comp.value_bits(
            holder.tensor, self.bits[holder.tensor]
        )

    def add(
        self, j: int, holder: Holder, here: Sizes, below: Sizes, crit: np.ndarray, depth
    ) -> None:
        """Add node ``j``'s reservation (tiles ``here`` at the node, ``below`` at the end
        of its gap) to its column; ``depth``: per row, the loops above it."""
        r = reservation_sizes(self.info, holder.tensor, holder.backing, here, below)
        bits = self.holder_bits(holder, r)
        if holder.component not in self.at_depth:
            crit[:, self.columns[holder.component]] += bits
        elif j in self.fused_pos:
            crit[:, self.shared[holder.component]] += bits
        elif j > self.p_max:
            crit[:, self.columns[holder.component]] += bits
        else:
            col = self.at_depth[holder.component][np.minimum(depth, self.depths - 1)]
            crit[np.arange(len(crit)), col] += bits

    def total(self, crit: np.ndarray, memory: str) -> np.ndarray:
        """What the rows reserve in ``memory`` in all."""
        total = crit[:, self.columns[memory]].copy()
        if memory in self.at_depth:
            cols = self.at_depth[memory]  # consecutive columns: a slice, not a copy
            total += crit[:, cols[0] : cols[-1] + 1].sum(axis=1)
            total += crit[:, self.shared[memory]]
        return total

    def gap_context(self) -> GapContext:
        """What the loop orders of the template's prefix gaps depend on
        (:mod:`fusemap.mapper.tiling.gap_orders`): these reservations."""
        return GapContext(
            self.p_max,
            frozenset(self.columns),
            frozenset(c for c in self.at_depth if c in self.columns),
            self.depths,
            dict(self.capacity),
            self.holder_bits,
        )

    def totals(self, crit: np.ndarray) -> dict[str, np.ndarray]:
        """What complete rows reserve in each tracked memory."""
        return {c: self.total(crit, c) for c in self.columns}

    def buckets(self, crit: np.ndarray) -> dict[str, np.ndarray]:
        """Per tracked memory the join shares, complete rows' reservations by loop depth
        (then the private ones below the deepest fused node): the join adds its
        neighbours' at each depth."""
        return {
            c: np.take(crit, np.append(cols, self.columns[c]), axis=1)  # one gather
            for c, cols in self.at_depth.items()
            if c in self.columns
        }

    def written(self, template: Template) -> set[int]:
        """The reservation columns the template's rows may write: each tracked memory's,
        the per-depth ones of a shared memory holding a private node among the fused
        loops, and its shared one if it holds a fused node."""
        written = set(self.columns.values())
        for c, cols in self.at_depth.items():
            if any(
                j < self.p_max and h.component == c and j not in self.fused_pos
                for j, h in enumerate(template.holders)
            ):
                written.update(int(k) for k in cols)
            if any(template.holders[p].component == c for p in self.fused_pos):
                written.add(self.shared[c])
        return written

    def fits(self, crit: np.ndarray) -> np.ndarray:
        """Rows within every tracked capacity."""
        fits = np.ones(len(crit), dtype=bool)
        for c in self.columns:
            fits &= self.total(crit, c) <= self.capacity[c] * FIT
        return fits

    def fits_below_fused_node(self, crit: np.ndarray) -> np.ndarray:
        """:meth:`fits` for rows that never wrote a per-depth column (they sit below the
        deepest fused node)."""
        fits = np.ones(len(crit), dtype=bool)
        for c, col in self.columns.items():
            total = crit[:, col] + crit[:, self.shared[c]] if c in self.shared else crit[:, col]
            fits &= total <= self.capacity[c] * FIT
        return fits

    def never_overflows(
        self, memory: str, so_far: np.ndarray, holders: tuple[Holder, ...], sizes: Sizes
    ) -> np.ndarray:
        """Rows whose ``memory`` cannot overflow whatever ``holders`` (the nodes below)
        choose: their tiles are at most ``sizes``, and ``so_far`` is reserved already."""
        worst = so_far
        for h in holders:
            if h.component == memory:
                worst = worst + self.holder_bits(h, sizes)
        return worst <= self.capacity[memory] * FIT


def build_reservations(
    template: Template,
    info: EinsumInfo,
    comp: dict[str, ComponentInfo],
    bits: dict[str, float],
    capacity: dict[str, float],
    layout: ColumnLayout,
    joined: frozenset[str],
    fused_pos: list[int],
    depths: int,
    memo: dict,
) -> Reservations:
    """The template's :class:`Reservations`: which memories it tracks (those its tensors
    could overflow whole, and the bounded ones the join shares, ``joined``)."""
    terms = memoized(
        memo, ("projections",), lambda: {x: projection_terms(info, x) for x in info.tensors}
    )
    whole: dict[str, float] = {}
    kept = [h for h in template.holders if not h.virtual]
    for h in kept:
        values = memoized(
            memo, ("values", h.tensor), lambda t=h.tensor: _whole_values(info, terms[t])
        )
        whole[h.component] = whole.get(h.component, 0.0) + values * comp[h.component].value_bits(
            h.tensor, bits[h.tensor]
        )
    columns: dict[str, int] = {}
    for h in kept:
        bounded = not math.isinf(comp[h.component].size)
        if whole[h.component] > capacity[h.component] * FIT or (bounded and h.component in joined):
            columns[h.component] = layout.reservation(h.component)
    shared_memories = [c.component for c in layout.columns if c.kind == Kind.SHARED]
    return Reservations(
        info,
        terms,
        comp,
        bits,
        capacity,
        columns,
        {c: layout.at_depths(c) for c in shared_memories},
        {c: layout.shared(c) for c in shared_memories},
        tuple(fused_pos),
        max(fused_pos, default=-1),
        depths,
    )


def _whole_values(info: EinsumInfo, terms: list[list[tuple[str, int]]]) -> float:
    """Values of the whole tensor."""
    full = {v: np.array([info.bounds[v]]) for v in info.rank_variables}
    return float(box_array(terms, full)[0])
